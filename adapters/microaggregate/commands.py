"""``querylog microaggregate``: user-level k-anonymity for a historical log (issue 14), blocked and parallel
(issue 15)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

from adapters.microaggregate.aggregate import Progress, output_events
from adapters.microaggregate.blocks import DEFAULT_BLOCK_SIZE, run_blocked
from adapters.microaggregate.log import read_log, write_log
from adapters.microaggregate.methods import METHODS
from adapters.microaggregate.srp_floor import SRP_MARGIN


@contextmanager
def progress_bar(total: int) -> Iterator[Progress]:
    """A tqdm bar of users placed, on stderr and only when stderr is a terminal."""
    from tqdm import tqdm

    bar = tqdm(total=total, unit="user", file=sys.stderr, disable=not sys.stderr.isatty(), leave=False)

    def update(placed: int) -> None:
        bar.update(placed - bar.n)

    try:
        yield update
    finally:
        bar.close()


@click.command("microaggregate")
@click.argument("input_path", metavar="INPUT")
@click.option("-k", "k", required=True, type=int, help="Smallest cluster size: every user hides among k-1 others.")
@click.option(
    "--method",
    default="mdav",
    show_default=True,
    type=click.Choice(list(METHODS)),
    help="; ".join(f"{name}: {text}" for name, (_, text) in METHODS.items()) + ".",
)
@click.option("--output", "-o", "output_path", default="-", help="Output file (.gz compresses); default: stdout.")
@click.option("--seed", default=None, type=int, help="Seed for a reproducible run (default: the OS random source).")
@click.option(
    "--block-size",
    default=DEFAULT_BLOCK_SIZE,
    show_default=True,
    type=click.IntRange(min=4),
    help="Most users per block (at least 2k): users ordered by query count and top word are cut into blocks, "
    "each microaggregated on its own. A log this size or smaller is one block (no blocking).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Blocks in parallel on a local Dask cluster of this many processes (needs the [dask] extra); "
    "1: one process, no Dask.",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="tcp://HOST:PORT",
    help="Run the blocks on this Dask scheduler instead (its workers need querylog-sidecar installed).",
)
def microaggregate_cmd(
    input_path: str,
    k: int,
    method: str,
    output_path: str,
    seed: int | None,
    block_size: int,
    workers: int,
    scheduler: str | None,
) -> None:
    """Microaggregate the users of INPUT (AOL TSV or JSON lines, gzip by extension, - for stdin).

    Every user keeps their id but gets the queries of their cluster's representative, so each cluster of
    k..2k-1 users has identical query multisets. The output has the input's schema. With --seed, the output
    is the same whatever --workers or --scheduler.
    """
    from sidecar.commandkit import setup_logs

    setup_logs()  # JSON lines on stderr (console on a terminal), as every other command
    if k < 2:
        raise click.BadParameter("k must be at least 2 (k=1 protects nobody)", param_hint="-k")
    if block_size < 2 * k:
        raise click.BadParameter(f"must be at least 2k = {2 * k}", param_hint="--block-size")
    started = time.monotonic()
    log = read_log(input_path)
    if len(log.users) < k:
        raise click.ClickException(f"the log has {len(log.users)} user(s), fewer than k={k}: k-anonymity is impossible")
    with progress_bar(len(log.users)) as progress:
        result = run_blocked(log, k, method, seed, block_size, workers, scheduler, progress)
    write_log(output_path, log.codec, output_events(log, result))
    sizes = [len(c) for c in result.clusters]
    bad = f", {log.bad_records} bad record(s) skipped" if log.bad_records else ""
    margin = f"1/k + {100 * SRP_MARGIN:g} point"
    floor = f", SRP floor ({margin}) out of reach in {result.floor_unmet} block(s)" if result.floor_unmet else ""
    click.echo(
        f"microaggregate ({method}, k={k}): {len(log.users)} users, {len(sizes)} clusters "
        f"of {min(sizes)}..{max(sizes)} users, {result.blocks} block(s){floor}{bad}, "
        f"{time.monotonic() - started:.1f} s",
        err=True,
    )
    sys.stdout.flush()
