"""The ``querylog`` command line: a click group whose commands all come from the ``querylog.commands`` group.

Built-in and third-party commands register the same way, as entry points in
``querylog.commands`` (see :mod:`sidecar.api`). The group loads them when it is
asked for a command or the help, so ``querylog --version`` imports nothing heavy.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import click

from sidecar.api import COMMANDS


class PluginGroup(click.Group):
    """A click group that adds every command registered under ``querylog.commands``."""

    _loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for ep in entry_points(group=COMMANDS):
            command = ep.load()
            if not isinstance(command, click.Command):
                raise click.ClickException(f"{COMMANDS}: {ep.name} ({ep.value}) is not a click command")
            if ep.name in self.commands:
                raise click.ClickException(f"{COMMANDS}: {ep.name!r} is registered twice")
            self.add_command(command, ep.name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._load()
        return super().get_command(ctx, cmd_name)


@click.group(cls=PluginGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="querylog-sidecar")
def main() -> None:
    """querylog-sidecar: a privacy filter for web-search query logs."""
