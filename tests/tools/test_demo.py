"""`querylog demo`: generate, serve config/default.yaml, stream over gRPC, protected output, summary."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from sidecar.cli import main


def test_demo_writes_protected_output_and_summary(tmp_path: Path) -> None:
    """`querylog demo --users 40 --seed 3` exits 0 and prints the summary line; protected.tsv keeps input.tsv's
    header and has one row per event out, 16-digit pseudonyms none of which is an original id, URLs cut to scheme and
    host; server.log records one server_stopped."""
    out_dir = tmp_path / "demo-out"
    result = CliRunner().invoke(main, ["demo", "--users", "40", "--seed", "3", "--out-dir", str(out_dir)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert re.search(r"events in=[\d,]+ out=[\d,]+ held=\d+ dropped=\d+ .*events/s=", text)
    assert str(out_dir / "protected.tsv") in text
    src = (out_dir / "input.tsv").read_text(encoding="utf-8").splitlines()
    dst = (out_dir / "protected.tsv").read_text(encoding="utf-8").splitlines()
    assert dst[0] == src[0] == "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
    n_in = int(re.search(r"events in=([\d,]+)", text).group(1).replace(",", ""))  # the demo prints its summary
    n_out = int(re.search(r"out=([\d,]+)", text).group(1).replace(",", ""))  # the demo prints its summary
    assert n_in == len(src) - 1 and n_out == len(dst) - 1 > 0
    rows = [line.split("\t") for line in dst[1:]]
    original_ids = {line.split("\t")[0] for line in src[1:]}
    assert all(re.fullmatch(r"\d{16}", r[0]) for r in rows)  # pseudonymized, still numeric
    assert not original_ids & {r[0] for r in rows}
    assert all(re.fullmatch(r"https?://[^/?#]+", r[4]) for r in rows if r[4])  # URLs cut to scheme + host
    assert (out_dir / "server.log").read_text().count("server_stopped") == 1
