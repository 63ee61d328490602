"""``querylog bench scale``: archive replay of the k-anonymity chain on 1 and N workers (issue 15).

A generated AOL-format log of ``--events`` events from ``--users`` users (the generator's sessions, cut into
runs of ``events / users`` lines, each run a user of its own) goes through ``config/k-anonymity.yaml``
(hipaa_scrub -> classify -> category_buffer -> profile, prescan on, as ``replay`` does by default):

* 1 worker: ``querylog replay`` in a child process, the one-process code path (no Dask);
* N workers: ``replay --workers N`` on Dask's local process pool, split and merge included.

For each: wall seconds of the replay (config and knowledge base loading included, interpreter start not),
events/s, speedup over 1 worker, and the resident-set high-water mark of every worker process. Then
``querylog microaggregate -k 5 --workers N`` (MDAV in blocks, issue 14) on generated logs of ``--micro-users``
users: wall seconds (reading and writing included) and speedup. The machine's other load counts against the
figures: they are indicative; rerun the command to re-measure.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import yaml

from sidecar.commandkit import needs_extras

REPO = Path(__file__).resolve().parents[3]
QUERYLOG = str(Path(sys.executable).with_name("querylog"))


def write_log(path: Path, events: int, users: int, seed: int) -> int:
    """A generated log of ``events`` lines; each run of ``events // users`` lines of a generated user becomes
    one user (fresh ids), so the log has about ``users`` users. Returns the number of users written."""
    from sidecar.tools.generate.synthetic import generate_log

    per = max(1, events // max(1, users))
    raw = path.with_suffix(".raw.tsv")
    generated, lines = events // 20 + 10, 0
    while lines <= events:  # the generator's users send 20 to 55 lines on average, depending on the seed
        with open(raw, "w", encoding="utf-8") as f:
            lines = generate_log(generated, seed, f, plant_identifiers=True).lines
        generated *= 2
    written, made, run, last = 0, 0, 0, None
    with open(raw, encoding="utf-8") as src, open(path, "w", encoding="utf-8") as out:
        out.write(src.readline())
        for line in src:
            if written >= events:
                break
            user, rest = line.split("\t", 1)
            if user != last or run >= per:
                made += 1
                run = 0
                last = user
            run += 1
            out.write(f"{made}\t{rest}")
            written += 1
    raw.unlink()
    return made


def knowledge_base(work: Path) -> Path:
    """A current knowledge base, built before any timing: the default one when current, else one in ``work``
    (a stale KB would be rebuilt inside the timed replay, by every worker)."""
    from knowledge import default_kb_path
    from knowledge.build import build
    from knowledge.loading import kb_status

    path = default_kb_path()
    if kb_status(path)[0] is not None:
        return path
    path = work / "kb.qlkb"
    build(path)
    return path


def bench_config(work: Path, kb: Path) -> Path:
    """config/k-anonymity.yaml with its state in ``work``, warnings-only logs, no sources or sinks, ``kb``."""
    data = yaml.safe_load((REPO / "config" / "k-anonymity.yaml").read_text(encoding="utf-8"))
    for f in data["filters"]:
        if "classify" in f:
            f["classify"] = {**(f["classify"] or {}), "kb_path": str(kb), "rebuild": False}
    data["state_dir"] = str(work / "state")
    data["dead_letter_file"] = None
    data["logging"] = {"level": "warning", "format": "json"}
    data.pop("sources", None)
    data.pop("server", None)
    data["sinks"] = []
    work.mkdir(parents=True, exist_ok=True)
    path = work / "k-anonymity.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def one_worker(config: Path, log: Path, out: Path, seed: int) -> tuple[float, float]:
    """``querylog replay`` in a child process: (seconds of the replay, peak RSS MiB of the child)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    run = subprocess.run(
        [QUERYLOG, "replay", "-c", str(config), str(log), "-o", str(out), "--seed", str(seed), "--no-progress"],
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        raise click.ClickException(f"replay failed: {run.stderr.strip().splitlines()[-1:]}")
    m = re.search(r"seconds=([0-9.]+)", run.stderr)
    if m is None:
        raise click.ClickException("replay printed no summary")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak <= before:  # an earlier, bigger child: this one's high-water mark is not visible
        peak = 0
    return float(m.group(1)), peak / 1024.0


def microaggregate(log: Path, out: Path, workers: int, seed: int) -> tuple[float, float]:
    """``querylog microaggregate -k 5 --workers N`` (MDAV in blocks, the microaggregate helper's entry point
    ``adapters.microaggregate.blocks.run_blocked``) in a child process: (wall seconds, peak RSS MiB of the
    largest process, the child or a Dask worker it reaped)."""
    import resource

    cmd = [QUERYLOG, "microaggregate", str(log), "-k", "5", "-o", str(out), "--seed", str(seed)]
    started = time.perf_counter()
    run = subprocess.run([*cmd, "--workers", str(workers)], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if run.returncode != 0:
        raise click.ClickException(f"microaggregate failed: {run.stderr.strip().splitlines()[-1:]}")
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


@needs_extras("dask", "microaggregate")
@click.command("scale")
@click.option("--events", default=1_000_000, show_default=True, help="Events in the generated log.")
@click.option("--users", default=100_000, show_default=True, help="Users in the generated log.")
@click.option(
    "--workers", "workers_list", default="1,2", show_default=True, help="Worker counts to run, comma separated."
)
@click.option("--seed", default=1, show_default=True, help="Seed of the log and of the chain's random choices.")
@click.option(
    "--micro-users",
    default="10000,100000",
    show_default=True,
    help="Also microaggregate generated logs of these many users (comma separated; empty: skip).",
)
def COMMAND(events: int, users: int, workers_list: str, seed: int, micro_users: str) -> None:
    """Events/s, speedup and peak memory per worker of `replay --workers N` with the k-anonymity chain."""
    from adapters.file.scale.replay import scaled_replay
    from sidecar.logs import configure_logging

    configure_logging("warning", "json")
    counts = sorted({int(w) for w in workers_list.split(",") if w.strip()})
    with tempfile.TemporaryDirectory(prefix="querylog-bench-scale-") as tmp:
        work = Path(tmp)
        log = work / "log.tsv"
        t0 = time.perf_counter()
        made = write_log(log, events, users, seed)
        click.echo(
            f"log: {events:,} events, {made:,} users, {log.stat().st_size / 2**20:,.0f} MiB "
            f"(generated in {time.perf_counter() - t0:.0f} s); chain: config/k-anonymity.yaml; "
            f"{os.cpu_count()} cores"
        )
        kb = knowledge_base(work)
        base: float | None = None
        for n in counts:
            cfg = bench_config(work / f"w{n}", kb)
            out = work / f"out{n}.tsv"
            if n == 1:
                seconds, rss = one_worker(cfg, log, out, seed)
                peaks = [rss]
                how = "one process, no Dask"
            else:
                s = scaled_replay(str(cfg), str(log), str(out), workers=n, seed=seed)
                seconds = s.seconds
                peaks = sorted(s.peak_rss_by_worker().values())
                how = f"Dask local processes, {n} partitions"
            rate = events / seconds
            base = base if base is not None or n != 1 else seconds
            speed = f", speedup {base / seconds:.2f}x" if base is not None and n != 1 else ""
            mem = ", ".join(f"{p:,.0f}" for p in peaks)
            click.echo(
                f"workers={n}: {seconds:,.1f} s, {rate:,.0f} events/s{speed}; peak RSS per worker MiB: {mem} ({how})"
            )
        click.echo("targets: speedup >= 1.7x on 2 cores; >= 40,000 events/s with 2 workers (paper 001's rate)")
        for m in [int(u) for u in micro_users.split(",") if u.strip()]:
            from sidecar.tools.generate.synthetic import generate_log

            mlog = work / f"micro{m}.tsv"
            with open(mlog, "w", encoding="utf-8") as f:
                lines = generate_log(m, seed, f).lines
            first: float | None = None
            for n in counts:
                seconds, rss = microaggregate(mlog, work / f"micro{m}-{n}.tsv", n, seed)
                first = seconds if n == 1 else first
                speed = f", speedup {first / seconds:.2f}x" if first is not None and n != 1 else ""
                click.echo(
                    f"microaggregate mdav k=5, {m:,} users ({lines:,} lines), workers={n}: {seconds:,.1f} s"
                    f"{speed}; peak RSS of the largest process so far MiB: {rss:,.0f}"
                )
