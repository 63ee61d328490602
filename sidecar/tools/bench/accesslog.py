"""``querylog bench accesslog``: passthrough of a generated nginx access log next to the same events as TSV.

The access log is nginx's ``combined``: one user an address, searches on ``/search?q=...`` (form-encoded, some with
``%20``, some with percent-encoded UTF-8, a ``page`` parameter; half the query texts unique), one line in five a
page view whose referer is the
user's previous search (its query released earlier in the run, so the referer rule keeps it), one in ten a search
whose referer is the user's previous search. The TSV log has the same users, queries and times. Both are replayed
through the empty chain, alternately, ``repeat`` times; each output must equal its input byte for byte.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from urllib.parse import quote, quote_plus

import click

from sidecar.tools.bench.common import peak_rss_mib

WORDS = (
    "weather",
    "cheap flights",
    "pizza near me",
    "lyrics",
    "café",
    "used cars",
    "mortgage rates",
    "flu symptoms",
    "hotels",
    "maps",
    "news",
    "c++ jobs",
)
AGENT = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"


def write_logs(folder: Path, events: int, seed: int) -> tuple[Path, Path]:
    """``access.log`` and ``events.tsv`` of ``events`` lines each (the TSV with its header)."""
    rng = random.Random(seed)
    access, tsv = folder / "access.log", folder / "events.tsv"
    last: dict[str, str] = {}
    with access.open("w", encoding="utf-8") as a, tsv.open("w", encoding="utf-8") as t:
        t.write("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n")
        for i in range(events):
            k = rng.randrange(events // 20 + 1)  # about 20 lines a user, as the passthrough bench's TSV log
            user = f"10.{k >> 16 & 255}.{k >> 8 & 255}.{k & 255}"
            text = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
            text += f" {rng.randrange(10**6)}" if i % 2 else ""  # half the queries unique: no cache flatters
            when = f"{1 + i % 28:02d}/Mar/2006:12:{i % 60:02d}:{i * 7 % 60:02d} +0000"
            encoded = quote(text, safe="") if i % 3 == 0 else quote_plus(text)
            previous = last.get(user)
            referer = f"https://shop.example{previous}" if previous and i % 5 in (0, 1) else "-"
            target = "/product/7" if previous and i % 5 == 0 else f"/search?q={encoded}&page={1 + i % 3}"
            if target.startswith("/search"):
                last[user] = target
            size = 512 + i % 1000
            a.write(f'{user} - - [{when}] "GET {target} HTTP/1.1" 200 {size} "{referer}" "{AGENT}"\n')
            t.write(f"{user}\t{text}\t2006-03-{1 + i % 28:02d} 12:{i % 60:02d}:00\t\t\n")
    return access, tsv


def bench(events: int, seed: int, repeat: int) -> dict[str, tuple[int, float, float]]:
    """Best seconds of each passthrough (by format: events, wall seconds, CPU seconds of the process: on a
    shared machine the CPU time is the steadier figure)."""
    from sidecar.config import load_config
    from sidecar.drive import replay
    from sidecar.logs import configure_logging

    configure_logging("warning", "json")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        access, tsv = write_logs(folder, events, seed)
        configs = {}
        for fmt, schema in (("access_log", "schema: {format: access_log}\n"), ("tsv", "")):
            path = folder / f"{fmt}.yaml"
            path.write_text(f"state_dir: state-{fmt}\n{schema}filters: []\n", encoding="utf-8")
            configs[fmt] = load_config(path)
        best = {"access_log": float("inf"), "tsv": float("inf")}
        cpu = dict(best)
        counts = {}
        for _ in range(repeat):
            for fmt, src in (("access_log", access), ("tsv", tsv)):
                out = folder / f"out-{fmt}"
                t0, c0 = time.perf_counter(), time.process_time()
                summary = replay(configs[fmt], str(src), str(out))
                best[fmt] = min(best[fmt], time.perf_counter() - t0)
                cpu[fmt] = min(cpu[fmt], time.process_time() - c0)
                counts[fmt] = summary.records_in
                if out.read_bytes() != src.read_bytes():
                    raise click.ClickException(f"the {fmt} passthrough output differs from its input")
        return {fmt: (counts[fmt], best[fmt], cpu[fmt]) for fmt in best}


@click.command("accesslog")
@click.option("--events", default=200_000, show_default=True, help="Lines of each generated log.")
@click.option("--seed", default=1, show_default=True, help="Seed of the generated logs.")
@click.option("--repeat", default=3, show_default=True, help="Runs of each, alternating; the best is reported.")
def COMMAND(events: int, seed: int, repeat: int) -> None:
    """Events/s of the access-log passthrough next to TSV's (both outputs checked byte for byte)."""
    found = bench(events, seed, repeat)
    for fmt, (n, seconds, cpu) in found.items():
        click.echo(
            f"{fmt:<11}: {n:>9,} events  {seconds:.3f} s  {n / seconds:>11,.0f} events/s  CPU {cpu:.3f} s  "
            "byte-identical"
        )
    ratio = found["access_log"][1] / found["tsv"][1]
    click.echo(f"access_log / tsv time: {ratio:.2f}x (CPU time: {found['access_log'][2] / found['tsv'][2]:.2f}x)")
    click.echo(f"peak RSS   : {peak_rss_mib():.1f} MiB")
