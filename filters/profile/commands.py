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
@click.option(
    "--state-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="The state folder holding the profiles (default: the config's state_dir): the one the run used.",
)
def export_cmd(config_file: str, fmt: Literal["json", "csv", "sqlite"], output: str, state_dir: str | None) -> None:
    """Write every profile (per-user category counts and weights) to a file."""
    from filters.profile import export_profiles
    from sidecar.state import StateStore

    cfg = load(config_file)
    folder = Path(state_dir).resolve() if state_dir is not None else cfg.state_dir
    if not folder.exists():
        click.echo(f"{folder}: no state folder (nothing profiled yet)", err=True)
        sys.exit(2)
    state = StateStore(folder)
    try:
        n = export_profiles(state, fmt, Path(output))
    finally:
        state.close()
    click.echo(f"exported {n:,} profiles to {output} ({fmt})", err=True)
