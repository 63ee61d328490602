"""``querylog bench archive``: the default and the k-anonymity chain on one archive, in one run (issue 28 item 7).

Both chains (``config/default.yaml`` and ``config/k-anonymity.yaml``, state in a temporary folder, no sources
or sinks, warnings-only logs) replay ``--input`` with ``querylog replay`` in child processes of their own, the
runs interleaved (default, k-anonymity, default...) ``--repeat`` times so that the machine's other load falls
on both alike. Printed per chain: the best and the median replay seconds (the replay's own summary: config and
knowledge base loading included, interpreter start not), events/s, and the median CPU seconds of the replay's
process and of those it started (the k-anonymity replay's first pass runs in a child process beside the real
pass, so its wall time can be shorter than its CPU time); then the k-anonymity chain's rate as a fraction of the
default chain's (best against best), and the same per CPU second (median against median). The k-anonymity
replay makes its prescan (``replay``'s default): the figure is what an archive costs end to end. Nothing of the
input is printed, only counts.
"""

from __future__ import annotations

import os
import re
import resource
import secrets
import statistics
import subprocess
import tempfile
from pathlib import Path

import click
import yaml

from sidecar.tools.bench.scale import QUERYLOG, REPO, knowledge_base

CHAINS = ("default", "k-anonymity")


def chain_config(name: str, work: Path, kb: Path) -> Path:
    """``config/NAME.yaml`` with its state in ``work``, warnings-only logs, no sources or sinks, ``kb``."""
    data = yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text(encoding="utf-8"))
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
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def code_knowledge_base(work: Path, code: Path) -> Path:
    """A knowledge base built by the checkout ``code`` (its categories and builder), before any timing."""
    path = work / "kb-code.qlkb"
    run = subprocess.run(
        [QUERYLOG, "kb", "build", "--kb", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(code)},
    )
    if run.returncode != 0:
        raise click.ClickException(f"kb build failed: {run.stderr.strip().splitlines()[-1:]}")
    return path


def replay_once(config: Path, log: Path, out: Path, seed: int, code: Path | None = None) -> tuple[float, int, float]:
    """One ``querylog replay`` in a child process, fresh state (``code``: a checkout to import the project from):
    (seconds of its summary, records in, CPU seconds of the replay and of any process it started)."""
    env = {**os.environ, "QUERYLOG_HMAC_KEY": os.environ.get("QUERYLOG_HMAC_KEY") or secrets.token_hex(32)}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    state = config.parent / "state"
    if state.exists():
        import shutil

        shutil.rmtree(state)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(
        [QUERYLOG, "replay", "-c", str(config), str(log), "-o", str(out), "--seed", str(seed), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if run.returncode != 0:
        raise click.ClickException(f"replay failed: {run.stderr.strip().splitlines()[-1:]}")
    seconds = re.search(r"seconds=([0-9.]+)", run.stderr)
    events = re.search(r"records in=([0-9]+)", run.stderr)
    if seconds is None or events is None:
        raise click.ClickException("replay printed no summary")
    return float(seconds.group(1)), int(events.group(1)), cpu


@click.command("archive")
@click.option(
    "--input",
    "log",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The archive (an AOL TSV or JSON lines file).",
)
@click.option("--repeat", default=3, show_default=True, help="Interleaved runs of each chain.")
@click.option("--seed", default=1, show_default=True, help="Seed of the chains' random choices.")
@click.option(
    "--code",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Run the replays with the project imported from this checkout (PYTHONPATH), e.g. a git worktree of an "
    "earlier commit: before/after figures in the same minutes.",
)
def COMMAND(log: Path, repeat: int, seed: int, code: Path | None) -> None:
    """Events/s of the default and the k-anonymity chain replaying one archive, and their ratio."""
    with tempfile.TemporaryDirectory(prefix="querylog-bench-archive-") as tmp:
        work = Path(tmp)
        kb = knowledge_base(work) if code is None else code_knowledge_base(work, code)
        configs = {name: chain_config(name, work / name, kb) for name in CHAINS}
        seconds: dict[str, list[float]] = {name: [] for name in CHAINS}
        cpu: dict[str, list[float]] = {name: [] for name in CHAINS}
        events = 0
        for _ in range(max(1, repeat)):
            for name in CHAINS:
                s, events, c = replay_once(configs[name], log, work / f"{name}.out", seed, code)
                seconds[name].append(s)
                cpu[name].append(c)
                (work / f"{name}.out").unlink()
        where = f"; code from {code}" if code is not None else ""
        click.echo(f"archive: {events:,} records; {os.cpu_count()} cores; {repeat} interleaved runs per chain{where}")
        for name in CHAINS:
            best, median = min(seconds[name]), statistics.median(seconds[name])
            click.echo(
                f"{name}: best {best:,.2f} s ({events / best:,.0f} events/s), median {median:,.2f} s "
                f"({events / median:,.0f} events/s); CPU median {statistics.median(cpu[name]):,.2f} s"
            )
        ratio = min(seconds["default"]) / min(seconds["k-anonymity"])
        by_cpu = statistics.median(cpu["default"]) / statistics.median(cpu["k-anonymity"])
        click.echo(f"k-anonymity / default events/s: {ratio:.2f}x (goal >= 0.6x); per CPU second: {by_cpu:.2f}x")
