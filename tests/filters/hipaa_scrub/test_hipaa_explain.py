"""`querylog scrub --explain` and the per-type counts in metrics (issue 16)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, generate_latest

from filters.hipaa_scrub import HipaaScrubConfig, HipaaScrubFilter, Scrubber
from sidecar.api import BuildContext, Event
from sidecar.cli import main
from sidecar.metrics import PipelineCollector

LINE = "john smith 123 main st plainfield nj 07060 call 555-123-4567 mbi 1EG4-TE5-MK73"
VALUES = ("john", "smith", "123 main", "plainfield", "07060", "555-123-4567", "1EG4-TE5-MK73")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """`querylog scrub` configures logging (level warning) for its process: restore the test session's."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


class TestExplain:
    def test_findings_give_type_span_detector_policy(self) -> None:
        """Scrubber.explain gives the text scrub gives, and per finding its type, its span (which indexes the
        value in the input), the detector that found it and the policy applied."""
        s = Scrubber(HipaaScrubConfig(policies={"zip": "generalize"}))
        text, findings = s.explain(LINE)
        assert text == s.scrub(LINE)[0]
        got = {(f["type"], LINE[f["start"] : f["end"]], f["detector"], f["policy"]) for f in findings}
        assert got == {
            ("name", "john smith", "NameDetector", "remove"),
            ("address", "123 main st plainfield nj", "AddressDetector", "remove"),
            ("zip", "07060", "ZipDetector", "generalize"),
            ("phone", "555-123-4567", "PhoneDetector", "remove"),
            ("health_plan", "1EG4-TE5-MK73", "MbiDetector", "remove"),
        }
        assert {f["pass"] for f in findings} == {1}

    def test_cli_explain_is_json_on_stdout_without_values_and_logs_nothing(self) -> None:
        """`scrub --explain` writes one JSON object per input line (line number, scrubbed text, findings); no
        identifier value appears in it, and nothing is logged."""
        with structlog.testing.capture_logs() as logs:
            r = CliRunner().invoke(main, ["scrub", "--explain"], input=LINE + "\nweather today\n")
        assert r.exit_code == 0, r.output
        rows = [json.loads(ln) for ln in r.output.splitlines()]
        assert [row["line"] for row in rows] == [1, 2]
        assert rows[1] == {"line": 2, "scrubbed": "weather today", "findings": []}
        assert {f["type"] for f in rows[0]["findings"]} == {"name", "address", "zip", "phone", "health_plan"}
        assert all(
            set(f) == {"type", "start", "end", "detector", "score", "policy", "pass"} for f in rows[0]["findings"]
        )
        for value in VALUES:
            assert value.lower() not in r.output.lower()
        assert logs == []

    def test_later_passes_are_marked(self) -> None:
        """A finding that only a rescan reveals is reported with pass 2 (its span indexes the text after pass 1)."""
        s = Scrubber(HipaaScrubConfig())
        text = "john 555-123-4567 smith"  # the name is whole only once the phone number has left
        scrubbed, findings = s.explain(text)
        assert scrubbed == s.scrub(text)[0] == ""
        assert [(f["type"], f["pass"]) for f in findings] == [("phone", 1), ("name", 2)]
        assert (findings[1]["start"], findings[1]["end"]) == (0, len("john smith"))


def test_metrics_show_counts_per_type() -> None:
    """The filter counts what it finds per type (found_<type>), and /metrics exports those counters by name
    (querylog_filter_count{filter="hipaa_scrub", name="found_phone"}), never a value."""
    f = HipaaScrubFilter(HipaaScrubConfig(), BuildContext(config_dir=Path(".")))
    f.process([Event("u1", "call 555-123-4567 or 020 7946 0958"), Event("u2", "mbi 1eg4te5mk73")])
    assert f.counts["found_phone"] == 2 and f.counts["found_health_plan"] == 1
    stats = {
        "events_in": 2,
        "events_out": 2,
        "events_dropped": 0,
        "events_dead_lettered": 0,
        "events_held": 0,
        "dead_letters": {},
        "filters": [{"name": "hipaa_scrub", "events_in": 2, "events_out": 2, "held": 0, "counts": dict(f.counts)}],
    }
    registry = CollectorRegistry()
    registry.register(PipelineCollector(lambda: stats))
    body = generate_latest(registry).decode()
    assert 'querylog_filter_count_total{filter="hipaa_scrub",name="found_phone"} 2.0' in body
    assert 'querylog_filter_count_total{filter="hipaa_scrub",name="found_health_plan"} 1.0' in body
    assert "555-123-4567" not in body and "1eg4te5mk73" not in body
