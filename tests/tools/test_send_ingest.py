"""`querylog send --ingest`: a log file into a sidecar's configured sinks through the Ingest RPC (what a
buffering chain asks for, where Filter is refused)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from helpers.grpc_sidecar import HoldAll, sidecar, write_config

from sidecar.cli import main

LOG = (
    "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
    "1\tweather\t2006-03-01 00:00:00\t\t\n"
    "2\tfootball scores\t2006-03-01 00:00:01\t\t\n"
    "3\tcheap flights\t2006-03-01 00:00:02\t1\thttp://example.com\n"
)


def test_send_ingest_delivers_into_the_sinks_of_a_buffering_chain(tmp_path: Path) -> None:
    """A chain that holds events (Filter is refused without a sink, and answers nothing with one): `send
    --ingest` hands every record to the sidecar, reports them held, and the sink has them after the release."""
    src = tmp_path / "in.tsv"
    src.write_text(LOG, encoding="utf-8")
    config = write_config(tmp_path, "filters: []\nsinks:\n  - file: {path: out.tsv}\n")
    hold = HoldAll()
    with sidecar(config, extra_filters=(hold,)) as sc:
        result = CliRunner().invoke(main, ["send", "--ingest", "--address", sc.address, "--batch-size", "2", str(src)])
        assert result.exit_code == 0, result.output
        assert len(hold.buffer) == 3
    assert "sent=3" in result.output and "accepted=3" in result.output and "held=3" in result.output
    lines = (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()
    assert sorted(line.split("\t")[1] for line in lines[1:]) == ["cheap flights", "football scores", "weather"]


def test_send_ingest_takes_no_output_and_one_address(tmp_path: Path) -> None:
    """--ingest delivers into the sidecar's sinks: -o is refused, as is a second --address; without --ingest,
    -o is required."""
    src = tmp_path / "in.tsv"
    src.write_text(LOG, encoding="utf-8")
    runner = CliRunner()
    with_output = runner.invoke(main, ["send", "--ingest", "-a", "127.0.0.1:1", "-o", "x.tsv", str(src)])
    assert with_output.exit_code == 2 and "--ingest" in with_output.output
    two = runner.invoke(main, ["send", "--ingest", "-a", "127.0.0.1:1", "-a", "127.0.0.1:2", str(src)])
    assert two.exit_code == 2 and "--ingest" in two.output
    neither = runner.invoke(main, ["send", "-a", "127.0.0.1:1", str(src)])
    assert neither.exit_code == 2 and "--output" in neither.output
