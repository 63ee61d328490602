"""``querylog docs``: print the generated reference docs."""

from __future__ import annotations

from typing import Literal

import click


@click.command("docs")
@click.argument("what", type=click.Choice(["config", "cli"]))
def docs(what: Literal["config", "cli"]) -> None:
    """Print the configuration reference or the CLI reference (Markdown)."""
    from sidecar.cli import docs_gen, main

    click.echo(docs_gen.config_reference() if what == "config" else docs_gen.cli_reference(main), nl=False)
