"""Queries and clicks through config/k-anonymity.yaml (``format: ubi``), on the tests' own generated stream and on
one built from a real query log with clicks (the AOL excerpt, /work/shared/data: skipped when absent): no click is
released before or without its query or under another user; the clicks of a query ``hipaa_scrub`` drops are
dropped at once; every query still pending is one the buffer holds or one it dropped without saying which.
Counts are printed (``-s``), never a line of the data."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers.ubi_aol import AOL, aol_ubi
from helpers.ubipipe import k_anonymity_config, released_ok, run
from helpers.ubistream import ubi_stream


def through_the_chain(folder: Path, lines: list[str], fields: dict[str, str] | None = None) -> dict[str, Any]:
    """Counts of ``lines`` through the k-anonymity chain in batches of 1,000, released after each."""
    p = run(k_anonymity_config(folder, fields), lines, [1000])
    try:
        stats = p.stats()
    finally:
        p.close()
    released = released_ok((folder / "out.ubi").read_text(encoding="utf-8").splitlines())
    joins = stats["joins"]
    return {
        "queries_in": sum(1 for line in lines if '"user_query"' in line),
        "released": dict(released),
        "queries_held": stats["events_held"],
        "clicks_held": joins["held"],
        "pending_queries": joins["pending_queries"],
        "counts": joins["counts"],
        "queries_dropped": joins["queries_dropped"],
    }


def check(c: dict[str, Any]) -> None:
    assert c["released"].get("violations", 0) == 0
    assert c["released"]["clicks"] > 0
    assert c["queries_dropped"].get("hipaa_scrub", 0) > 0 and c["counts"]["dropped_with_query"] > 0
    unidentified = c["counts"].get("buffer_drops_unidentified", 0)
    assert c["pending_queries"] <= c["queries_held"] + unidentified  # no query dropped by a filter stays pending


def test_own_generated_stream(tmp_path: Path) -> None:
    counts = through_the_chain(tmp_path, ubi_stream(11, users=60, queries=1500).lines)
    print(f"ubi k-anonymity, own stream: {counts}")
    check(counts)


@pytest.mark.skipif(not AOL.is_file(), reason="shared data absent")
def test_real_queries_and_clicks() -> None:
    stream = aol_ubi()
    with tempfile.TemporaryDirectory(prefix="ubi-aol-") as folder:
        counts = through_the_chain(Path(folder), stream.lines, {})
    print(f"ubi k-anonymity, AOL-derived: clicks_in={stream.clicks} {counts}")
    check(counts)
