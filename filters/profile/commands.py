"""``querylog profiles export``: the profile filter's per-user category counts and weights."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import click

from sidecar.commandkit import load


@click.group("profiles")
def profiles() -> None:
    """User profiles built by the `profile` filter (paper 001 profiler)."""


@profiles.command("export")
@click.option(
    "--config",
    "-c",
    "config_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="Config whose state_dir holds the profiles.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "csv", "sqlite"]),
    default="json",
    show_default=True,
    help="json: {user: {category: {count, weight}}}; csv: user,category,count,weight; sqlite: a table.",
)
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="Output file.")
def export_cmd(config_file: str, fmt: Literal["json", "csv", "sqlite"], output: str) -> None:
    """Write every profile (per-user category counts and weights) to a file."""
    from filters.profile import export_profiles
    from sidecar.state import StateStore

    cfg = load(config_file)
    if not cfg.state_dir.exists():
        click.echo(f"{cfg.state_dir}: no state folder (nothing profiled yet)", err=True)
        sys.exit(2)
    state = StateStore(cfg.state_dir)
    try:
        n = export_profiles(state, fmt, Path(output))
    finally:
        state.close()
    click.echo(f"exported {n:,} profiles to {output} ({fmt})", err=True)
