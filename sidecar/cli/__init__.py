"""The ``querylog`` command line: a click group whose commands all come from the ``querylog.commands`` group.

Built-in and third-party commands register the same way, as entry points in
``querylog.commands`` (see :mod:`sidecar.api`). The group loads them when it is
asked for a command or the help, so ``querylog --version`` imports nothing heavy.

A command that needs an extra says so in its entry point (``audit = "sidecar.tools.audit.command:audit_cmd
[audit]"``). When that extra's dependencies are not installed, the command's module is not imported: the
command stands as one that prints ``querylog audit: needs the [audit] extra: pip install
'querylog-sidecar[audit]'`` and exits 2, whatever its arguments (``--help`` included).
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

import click

from sidecar.api import COMMANDS


class ExtraMissing(click.Command):
    """Stands in for a command whose extra is not installed: any use prints one line naming it and exits 2."""

    def __init__(self, name: str, extra: str, message: str) -> None:
        self.message = message
        super().__init__(
            name,
            help=self.message,
            short_help=f"(needs the [{extra}] extra)",
            add_help_option=False,
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        )

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from sidecar.commandkit import EXIT_USAGE

        click.echo(self.message, err=True)
        ctx.exit(EXIT_USAGE)


class PluginGroup(click.Group):
    """A click group whose commands are the entry points of ``querylog.commands``.

    Running one command imports only that command's module; listing the names
    (``--help``) reads the entry points without importing any; ``commands`` (for
    the docs and the tests) loads them all.
    """

    _commands: dict[str, click.Command]

    @property  # type: ignore[override]  # click declares a plain attribute; a property loads it lazily
    def commands(self) -> dict[str, click.Command]:
        for name in self._registered():
            self._load(name)
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = value

    _entry_points: dict[str, EntryPoint] | None = None

    def _registered(self) -> dict[str, EntryPoint]:
        """The entry points of ``querylog.commands`` by name, read once."""
        if self._entry_points is None:
            found: dict[str, EntryPoint] = {}
            for ep in entry_points(group=COMMANDS):
                if ep.name in found:
                    raise click.ClickException(f"{COMMANDS}: {ep.name!r} is registered twice")
                found[ep.name] = ep
            self._entry_points = found
        return self._entry_points

    def _load(self, name: str) -> click.Command | None:
        if name in self._commands:
            return self._commands[name]
        ep = self._registered().get(name)
        if ep is None:
            return None
        if ep.extras:  # "module:command [audit]": not imported unless that extra is installed
            from sidecar.commandkit import DISTRIBUTION, extra_message, missing_for_extra

            dist = ep.dist.name if ep.dist is not None else DISTRIBUTION
            for extra in ep.extras:
                if missing_for_extra(extra, dist):
                    message = extra_message(f"querylog {name}", extra, dist)
                    self._commands[name] = ExtraMissing(name, extra, message)
                    return self._commands[name]
        command = ep.load()
        if not isinstance(command, click.Command):
            raise click.ClickException(f"{COMMANDS}: {ep.name} ({ep.value}) is not a click command")
        self._commands[name] = command
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self._commands) | set(self._registered()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)


@click.group(cls=PluginGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="querylog-sidecar")
def main() -> None:
    """querylog-sidecar: a privacy filter for web-search query logs."""
