"""``querylog microaggregate``: user-level k-anonymity for a historical log (issue 14, paper 003's MDAV)."""

from __future__ import annotations

import random
import sys
import time

import click

from adapters.microaggregate.aggregate import output_events
from adapters.microaggregate.log import read_log, write_log
from adapters.microaggregate.methods import METHODS


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
def microaggregate_cmd(input_path: str, k: int, method: str, output_path: str, seed: int | None) -> None:
    """Microaggregate the users of INPUT (AOL TSV or JSON lines, gzip by extension, - for stdin).

    Every user keeps their id but gets the queries of their cluster's representative, so each cluster of
    k..2k-1 users has identical query multisets. The output has the input's schema.
    """
    if k < 2:
        raise click.BadParameter("k must be at least 2 (k=1 protects nobody)", param_hint="-k")
    started = time.monotonic()
    rng: random.Random = random.Random(seed) if seed is not None else random.SystemRandom()
    log = read_log(input_path)
    if len(log.users) < k:
        raise click.ClickException(f"the log has {len(log.users)} user(s), fewer than k={k}: k-anonymity is impossible")
    result = METHODS[method][0](log, k, rng, None)
    write_log(output_path, log.codec, output_events(log, result))
    clusters = result.clusters
    sizes = [len(c) for c in clusters]
    bad = f", {log.bad_records} bad record(s) skipped" if log.bad_records else ""
    click.echo(
        f"microaggregate ({method}, k={k}): {len(log.users)} users, {len(clusters)} clusters "
        f"of {min(sizes)}..{max(sizes)} users{bad}, {time.monotonic() - started:.1f} s",
        err=True,
    )
    sys.stdout.flush()
