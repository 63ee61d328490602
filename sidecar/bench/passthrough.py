"""``querylog bench passthrough``: file replay through the passthrough chain."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import click

from sidecar.bench import peak_rss_mib


def _write_log(path: Path, events: int, seed: int) -> None:
    """A synthetic AOL-format log of ``events`` lines (header included)."""
    import random

    rng = random.Random(seed)
    words = ["weather", "cheap flights", "pizza near me", "lyrics", "ebay", "myspace", "jobs", "recipes",
             "used cars", "mortgage rates", "nba scores", "flu symptoms", "hotels", "maps", "news"]
    with path.open("w", encoding="utf-8") as out:
        out.write("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n")
        for i in range(events):
            user = 1000 + rng.randrange(events // 20 + 1)
            q = f"{rng.choice(words)} {rng.choice(words)}"
            if i % 2:
                click_cols = f"{1 + i % 10}\thttp://www.example{i % 97}.com"
                out.write(f"{user}\t{q}\t2006-03-{1 + i % 28:02d} 12:{i % 60:02d}:00\t{click_cols}\n")
            else:
                out.write(f"{user}\t{q}\t2006-03-{1 + i % 28:02d} 12:{i % 60:02d}:00\t\t\n")


def bench_file_replay(events: int, seed: int, repeat: int) -> dict[str, float]:
    from sidecar.config import load_config
    from sidecar.logs import configure_logging
    from sidecar.replay import replay

    configure_logging("warning", "json")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.tsv"
        _write_log(src, events, seed)
        cfg_path = Path(tmp) / "passthrough.yaml"
        cfg_path.write_text("state_dir: state\nfilters: []\n")
        cfg = load_config(cfg_path)
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            summary = replay(cfg, str(src), str(Path(tmp) / "out.tsv"))
            best = min(best, time.perf_counter() - t0)
            if (Path(tmp) / "out.tsv").read_bytes() != src.read_bytes():
                raise click.ClickException("passthrough output differs from input")
        return {"events": summary.records_in, "seconds": best, "events_per_s": summary.records_in / best}


@click.command("passthrough")
@click.option("--events", default=1_000_000, show_default=True, help="Events in the synthetic log.")
@click.option("--seed", default=1, show_default=True)
@click.option("--repeat", default=3, show_default=True, help="Runs; the best is reported.")
def COMMAND(events: int, seed: int, repeat: int) -> None:
    """Events/s of the passthrough chain: file replay (output checked byte-identical)."""
    r = bench_file_replay(events, seed, repeat)
    click.echo(f"file replay   : {r['events']:>9,} events  {r['seconds']:.3f} s  {r['events_per_s']:>11,.0f} events/s")
    click.echo(f"peak RSS      : {peak_rss_mib():.1f} MiB")
