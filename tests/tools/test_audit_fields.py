"""The audit scans every field of a release for identifiers, not only the query (issue 25 item 3).

Each non-role field (a JSON key, a TSV column, an access log's variable) goes through the hipaa_scrub detectors;
the result counts findings by field name and identifier type (never a value), the guarantee "No identifier left in
any field" needs attention when any is left, and the HTML identifiers table has a row per field and type.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import ROOT
from helpers.access_log import generate
from helpers.nginx import NGINX, nginx_access_log

from sidecar.cli import main
from sidecar.config import load_config
from sidecar.tools.audit import report
from sidecar.tools.audit.html import identifiers_section as render
from sidecar.tools.audit.logs import read_log
from sidecar.tools.audit.verdicts import guarantees

KEY = "audit-fields-test-key-not-secret-01"
SSN = "536-22-8751"  # a valid-looking SSN
EMAIL, ADDRESS, SECRET_TEXT = "jane.roe@example.org", "198.51.100.23", "jane.roe"
FIELD_GUARANTEE = "No identifier left in any field (hipaa_scrub detectors)"


def categorise(queries: list[str]) -> list[str | None]:
    return [q.split()[0].capitalize() if q.strip() else None for q in queries]


def json_release(path: Path) -> None:
    """JSON lines: an e-mail in a field nobody declared (``note``), an address in ``client_ip`` on every record."""
    rows = [
        {"AnonID": str(u), "Query": f"{t} news", "client_ip": ADDRESS, "note": EMAIL if u % 2 else "ok", "n": u}
        for u, t in enumerate(["health", "sports", "arts", "games"] * 3)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def field_guarantee(result: dict[str, object]) -> dict[str, str]:
    return next(g for g in guarantees(result) if g["guarantee"] == FIELD_GUARANTEE)


def audit(original: Path, protected: Path, config: Path | None = None) -> dict[str, object]:
    schema = load_config(config).sidecar.schema if config else None
    return report.run_audit(str(original), str(protected), categorise=categorise, k=2, schema=schema)


def test_a_json_release_with_identifiers_in_other_fields_is_found_by_field(tmp_path: Path) -> None:
    src = tmp_path / "release.jsonl"
    json_release(src)
    result = audit(src, src)
    fields = result["identifiers"]["fields"]["protected"]  # type: ignore[index]
    assert fields["by_field"] == {"client_ip": {"ip": 12}, "note": {"email": 6}}
    assert fields["field_values_with_identifier"] == 18
    assert fields["fields_checked"] == ["client_ip", "n", "note"]  # the roles are not fields
    g = field_guarantee(result)
    assert g["status"] == "attention"
    assert "client_ip: ip 12" in g["figure"] and "note: email 6" in g["figure"]
    page = render(result)
    assert "client_ip: ip" in page and "note: email" in page
    text = json.dumps(result) + page + g["figure"] + g["why"]
    assert EMAIL not in text and ADDRESS not in text and SECRET_TEXT not in text  # counts only, never a value


def test_the_same_release_through_field_policies_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUERYLOG_FIELD_KEY", KEY)
    src, out = tmp_path / "release.jsonl", tmp_path / "protected.jsonl"
    json_release(src)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"state_dir: {tmp_path / 'state'}\nschema:\n  format: jsonl\n  fields:\n    client_ip: hash\n    n: keep\n"
        "  unlisted: drop\n  field_key_env: QUERYLOG_FIELD_KEY\nfilters: []\n",
        encoding="utf-8",
    )
    res = CliRunner().invoke(main, ["replay", str(src), "-c", str(config), "-o", str(out)])
    assert res.exit_code == 0, res.output
    result = audit(src, out, config)
    fields = result["identifiers"]["fields"]  # type: ignore[index]
    assert fields["protected"]["field_values_with_identifier"] == 0
    assert fields["original"]["by_field"] == {"client_ip": {"ip": 12}, "note": {"email": 6}}
    assert field_guarantee(result)["status"] == "ok"


@pytest.fixture
def access_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """config/access-log.yaml with its state in ``tmp_path`` and the field key set."""
    monkeypatch.setenv("QUERYLOG_FIELD_KEY", KEY)
    body = yaml.safe_load((ROOT / "config" / "access-log.yaml").read_text(encoding="utf-8"))
    body["state_dir"] = str(tmp_path / "state")
    path = tmp_path / "access-log.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    return path


def test_an_access_log_through_the_ready_config_leaves_nothing_and_its_raw_passthrough_is_found(
    tmp_path: Path, access_config: Path
) -> None:
    """The referer carries the previous search's planted identifiers: found in the raw log, none after the
    ready config (the query role is the request's parameter; the referer is a field)."""
    src, out = tmp_path / "access.log", tmp_path / "protected.log"
    log = generate(400, seed=4)
    src.write_text("".join(log.lines), encoding="utf-8")
    res = CliRunner().invoke(main, ["replay", str(src), "-c", str(access_config), "-o", str(out)])
    assert res.exit_code == 0, res.output
    raw = audit(src, src, access_config)
    raw_fields = raw["identifiers"]["fields"]["protected"]  # type: ignore[index]
    assert "http_referer" in raw_fields["by_field"] and raw_fields["field_values_with_identifier"] > 0
    assert {"email", "ssn"} <= set(raw_fields["by_field"]["http_referer"])
    assert field_guarantee(raw)["status"] == "attention"
    protected = audit(src, out, access_config)
    fields = protected["identifiers"]["fields"]["protected"]  # type: ignore[index]
    assert fields["records_checked"] == len(log.lines)
    assert "http_referer" in fields["fields_checked"]
    assert fields["field_values_with_identifier"] == 0, fields["by_field"]
    assert field_guarantee(protected)["status"] == "ok"


def test_format_auto_reads_an_access_log_by_its_content(tmp_path: Path) -> None:
    """Without a config, a `combined` log without a telling extension is read as an access log."""
    src = tmp_path / "access.log"
    src.write_text("".join(generate(50, seed=2).lines), encoding="utf-8")
    seen: list[str] = []
    records, bad = read_log(str(src), fields=lambda name, value: seen.append(name))
    assert bad == 0 and len(records) == 50
    assert {"http_referer", "http_user_agent", "status"} <= set(seen)
    assert "remote_addr" not in seen  # the user role


@pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed")
def test_a_log_nginx_wrote_is_found_raw_and_clean_through_the_ready_config(tmp_path: Path, access_config: Path) -> None:
    """Independent of our generator: nginx's own `combined` log, an SSN and an e-mail in referers (search URLs)
    and an e-mail in a user agent, as curl sent them."""
    agent = "Mozilla/5.0 (X11; Linux x86_64) contact jane.roe@example.org"
    requests = [
        ("/search?q=cheap+flights", ["-A", agent]),
        ("/search?q=flu", ["-e", f"http://localhost/search?q=my+ssn+{SSN}+help", "-A", agent]),
        ("/static/a.css", ["-e", "http://localhost/search?q=email+jane.doe%40example.com"]),
        ("/search?q=news", []),
    ]
    log = nginx_access_log(tmp_path, "access_log {log} combined;", requests)
    raw = audit(log, log, access_config)["identifiers"]["fields"]["protected"]  # type: ignore[index]
    assert raw["by_field"] == {"http_referer": {"email": 1, "ssn": 1}, "http_user_agent": {"email": 2}}
    out = tmp_path / "protected.log"
    res = CliRunner().invoke(main, ["replay", str(log), "-c", str(access_config), "-o", str(out)])
    assert res.exit_code == 0, res.output
    protected = audit(log, out, access_config)
    assert protected["identifiers"]["fields"]["protected"]["field_values_with_identifier"] == 0  # type: ignore[index]
    assert field_guarantee(protected)["status"] == "ok"
