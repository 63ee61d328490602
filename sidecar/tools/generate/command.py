"""``querylog generate``: a synthetic AOL-format query log for demos and tests."""

from __future__ import annotations

import json

import click

from sidecar.tools.generate.synthetic import generate_log, open_output


@click.command("generate")
@click.option("--users", "-n", type=click.IntRange(min=0), default=100, show_default=True, help="Users in the log.")
@click.option("--seed", "-s", type=int, default=0, show_default=True, help="Seed: the same seed gives the same log.")
@click.option("--output", "-o", default="-", show_default=True, help="Output file (.gz compresses); `-` is stdout.")
@click.option(
    "--identifiers/--no-identifiers",
    default=True,
    show_default=True,
    help="Plant identifiers (names, phones, emails, SSNs, addresses, ZIP codes, dates of birth) in a few queries.",
)
@click.option(
    "--planted",
    "planted_path",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Also write the planted identifiers (kind, value, anon_id, line) as JSON lines to this file.",
)
@click.option(
    "--lines-per-user",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Scale every user's query count so the log has about this many lines per user (default: about 23; "
    "papers 002/003 used 1,000 users with about 55,000 lines: 55).",
)
def generate_cmd(
    users: int, seed: int, output: str, identifiers: bool, planted_path: str | None, lines_per_user: float | None
) -> None:
    """Write a synthetic AOL-format query log: topical users, sessions, clicks, planted identifiers."""
    with open_output(output) as out:
        stats = generate_log(users, seed, out, plant_identifiers=identifiers, lines_per_user=lines_per_user)
    if planted_path:
        with open(planted_path, "w", encoding="utf-8") as fh:
            for p in stats.planted:
                fh.write(json.dumps({"kind": p.kind, "value": p.value, "anon_id": p.anon_id, "line": p.line}) + "\n")
    click.echo(
        f"generated users={stats.users} lines={stats.lines} queries={stats.queries} "
        f"click_lines={stats.click_lines} planted={len(stats.planted)}",
        err=True,
    )
