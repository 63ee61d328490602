"""``querylog bench microaggregate``: seconds and peak memory of ``querylog microaggregate`` (issues 14, 15).

For each ``--users`` size a log is generated (``querylog generate -n USERS --seed SEED``; its lines are printed:
the generator gives about 23 lines per user, the papers' AOL sample about 56), and each ``--log`` file is taken
as it is. Every (log, method, workers) runs in a child process of its own through
``adapters.microaggregate.blocks.run_blocked`` (the CLI's entry point), so the figures are that run's alone:

* **read** and **run** — wall seconds to read the log and to microaggregate it (blocking, MDAV or another
  method, aggregation; a Dask cluster's start included when ``workers > 1``);
* **cpu** — user + system seconds of the child and of every process under it (Dask workers), which, on a
  machine shared with other work, says more than the wall time;
* **peak RSS** — the child's resident-set high-water mark (``getrusage``) and, with Dask, the largest worker's
  (sampled every 0.1 s with psutil);
* **PEL and ILR** — paper 003's mean profile exposure level and information loss ratio over the users
  (``querylog audit``'s definitions), so that the cost of blocking shows: run the same log with a block size
  above its number of users (one block: plain MDAV) and with a smaller one.

Nothing of the logs is printed, only counts and figures. Timings depend on the machine's other load: rerun to
re-measure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click

from sidecar.commandkit import needs_extras

DEFAULT_AOL = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "aol-sample.tsv"


class Sampler:
    """Peak RSS and CPU seconds of the processes under this one, sampled every ``interval`` seconds."""

    def __init__(self, interval: float = 0.1) -> None:
        import psutil

        self.me = psutil.Process()
        self.interval = interval
        self.peak: dict[int, int] = {}
        self.cpu: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self.stop.wait(self.interval):
            for child in self.me.children(recursive=True):
                try:
                    rss = child.memory_info().rss
                    times = child.cpu_times()
                except psutil.Error:
                    continue
                self.peak[child.pid] = max(self.peak.get(child.pid, 0), rss)
                self.cpu[child.pid] = times.user + times.system

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def child(path: str, k: int, method: str, workers: int, block_size: int, seed: int) -> None:
    """One measured run (in a fresh interpreter): prints one JSON line of figures."""
    import resource

    from adapters.microaggregate.blocks import run_blocked
    from adapters.microaggregate.log import read_log

    started = time.perf_counter()
    log = read_log(path)
    read = time.perf_counter() - started
    with Sampler() as sampler:
        started = time.perf_counter()
        result = run_blocked(log, k, method, seed, block_size, workers)
        run = time.perf_counter() - started
    own = resource.getrusage(resource.RUSAGE_SELF)
    pel, ilr = _pel_ilr(log, result)
    sizes = [len(c) for c in result.clusters]
    figures = {
        "users": len(log.users),
        "lines": sum(len(g) for g in log.events),
        "read": read,
        "run": run,
        "cpu": own.ru_utime + own.ru_stime + sum(sampler.cpu.values()),
        "rss": own.ru_maxrss / 1024.0,
        "worker_rss": max(sampler.peak.values(), default=0) / 2**20,
        "clusters": len(sizes),
        "smallest": min(sizes),
        "largest": max(sizes),
        "blocks": result.blocks,
        "pel": pel,
        "ilr": ilr,
    }
    print(json.dumps(figures))


def _pel_ilr(log: Any, result: Any) -> tuple[float, float]:
    """Mean PEL and ILR (paper 003 §4.1-4.2, as ``querylog audit`` computes them) of the users, in percent."""
    from collections import Counter

    from adapters.microaggregate.aggregate import output_events
    from sidecar.tools.audit.measures_microagg import ilr, pel

    protected: dict[Any, Counter[str]] = {}
    for event in output_events(log, result):
        protected.setdefault(event.user, Counter())[str(event.query or "")] += 1
    pels, ilrs = [], []
    for user, events in zip(log.users, log.events):
        original = Counter(str(e.query or "") for e in events)
        if (p := pel(original, protected[user])) is not None:
            pels.append(p)
        if (i := ilr(original, protected[user])) is not None:
            ilrs.append(i)
    return 100 * sum(pels) / max(1, len(pels)), 100 * sum(ilrs) / max(1, len(ilrs))


def measure(path: Path, k: int, method: str, workers: int, block_size: int, seed: int) -> dict[str, Any]:
    """:func:`child` in a child process; its figures."""
    code = (
        "from sidecar.tools.bench.microaggregate import child; "
        f"child({str(path)!r}, {k}, {method!r}, {workers}, {block_size}, {seed})"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise click.ClickException(f"the {method} run failed: {tail[0]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _csv_ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"a comma-separated list of integers, got {text!r}") from exc


@needs_extras("microaggregate")
@click.command("microaggregate")
@click.option("--users", "users_list", default="1000,10000", show_default=True, help="Generated log sizes (users).")
@click.option(
    "--log",
    "logs",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Also measure this log (repeatable); the AOL sample is added with --aol.",
)
@click.option(
    "--aol/--no-aol", default=False, show_default=True, help="Also measure ../shared/data/aol-sample.tsv if present."
)
@click.option("--k", "k", default=3, show_default=True, type=click.IntRange(min=2), help="Smallest cluster size.")
@click.option("--method", "methods", default="mdav", show_default=True, help="Methods, comma separated.")
@click.option("--workers", "workers_list", default="1", show_default=True, help="Worker counts, comma separated.")
@click.option("--block-size", default=1000, show_default=True, type=click.IntRange(min=4), help="Users per block.")
@click.option("--seed", default=1, show_default=True, help="Seed of the generated logs and of the runs.")
@click.option(
    "--lines-per-user",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Generate about this many lines per user (papers 002/003: 1,000 users, about 55,000 lines: 55); "
    "default: the generator's own distribution (about 23).",
)
def COMMAND(
    users_list: str,
    logs: tuple[Path, ...],
    aol: bool,
    k: int,
    methods: str,
    workers_list: str,
    block_size: int,
    seed: int,
    lines_per_user: float | None,
) -> None:
    """Seconds and peak memory of `microaggregate` on generated logs (and given ones), per method and workers."""
    from adapters.microaggregate.methods import METHODS
    from sidecar.tools.generate.synthetic import generate_log

    names = [m.strip() for m in methods.split(",") if m.strip()]
    for name in names:
        if name not in METHODS:
            raise click.BadParameter(f"unknown method {name!r}; known: {', '.join(METHODS)}", param_hint="--method")
    workers = _csv_ints(workers_list)
    with tempfile.TemporaryDirectory(prefix="bench-microaggregate-") as tmp:
        inputs: list[tuple[str, Path]] = []
        for n in _csv_ints(users_list):
            path = Path(tmp) / f"generated-{n}.tsv"
            with open(path, "w", encoding="utf-8") as out:
                generate_log(n, seed, out, lines_per_user=lines_per_user)
            inputs.append((f"generated {n:,} users", path))
        inputs += [(f"log {i + 1}", p) for i, p in enumerate(logs)]
        if aol and DEFAULT_AOL.is_file():
            inputs.append(("AOL sample", DEFAULT_AOL.resolve()))
        for label, path in inputs:
            for name in names:
                for n_workers in workers:
                    f = measure(path, k, name, n_workers, block_size, seed)
                    worker = f", largest worker {f['worker_rss']:,.0f} MiB" if n_workers > 1 else ""
                    click.echo(
                        f"{label} ({f['users']:,} users, {f['lines']:,} lines), {name}, k={k}, workers={n_workers}, "
                        f"block size {block_size:,}: run {f['run']:,.1f} s (read {f['read']:,.1f} s, "
                        f"cpu {f['cpu']:,.1f} s), peak RSS {f['rss']:,.0f} MiB{worker}; "
                        f"{f['clusters']:,} clusters of {f['smallest']}..{f['largest']}, {f['blocks']} block(s); "
                        f"PEL {f['pel']:.1f}%, ILR {f['ilr']:.1f}%"
                    )
