"""``querylog docs``: print the generated reference docs."""

from __future__ import annotations

from typing import Literal

import click


@click.command("docs")
@click.argument("what", type=click.Choice(["config", "cli"]))
def docs(what: Literal["config", "cli"]) -> None:
    """Print the configuration reference or the CLI reference (Markdown)."""
    from sidecar import docs as gen
    from sidecar.cli import main

    click.echo(gen.config_reference() if what == "config" else gen.cli_reference(main), nl=False)


COMMANDS = [docs]
