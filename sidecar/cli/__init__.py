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
    """A click group whose ``commands`` are the entry points of ``querylog.commands``, loaded on first use."""

    _loaded = False
    _commands: dict[str, click.Command]

    @property  # type: ignore[override]  # click declares a plain attribute; a property loads it lazily
    def commands(self) -> dict[str, click.Command]:
        if not self._loaded:
            self._loaded = True
            self._load()
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = value

    def _load(self) -> None:
        for ep in entry_points(group=COMMANDS):
            command = ep.load()
            if not isinstance(command, click.Command):
                raise click.ClickException(f"{COMMANDS}: {ep.name} ({ep.value}) is not a click command")
            if ep.name in self._commands:
                raise click.ClickException(f"{COMMANDS}: {ep.name!r} is registered twice")
            self._commands[ep.name] = command


@click.group(cls=PluginGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="querylog-sidecar")
def main() -> None:
    """querylog-sidecar: a privacy filter for web-search query logs."""
