"""What every ``querylog`` command shares: load a config or exit 2 with its located error, set up logs.

Commands register under the entry-point group ``querylog.commands`` (see
:mod:`sidecar.api`); they use these helpers so every command reports config
errors the same way.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from sidecar.config import ConfigError, LoadedConfig, load_config
from sidecar.logs import configure_logging

#: Exit status for a bad config, a bad option value or an input that cannot be used.
EXIT_USAGE = 2
#: Exit status when the state database is damaged, empty where it should not be, or cannot be written.
EXIT_STATE = 3
#: Exit status when another process holds the state folder (one writer per state folder).
EXIT_IN_USE = 4


def fail_config(exc: ConfigError) -> NoReturn:
    """Print the located error and exit 2."""
    click.echo(str(exc), err=True)
    sys.exit(EXIT_USAGE)


def load(config_path: str) -> LoadedConfig:
    """Load a config or exit 2 with the located error."""
    try:
        return load_config(config_path)
    except ConfigError as exc:
        fail_config(exc)


def setup_logs(config: LoadedConfig | None = None, level: str | None = None) -> None:
    """Own logs as configured (JSON, or console on a terminal); defaults without a config; ``level`` overrides."""
    if config is None:
        configure_logging(*([level] if level else []))
    else:
        configure_logging(level or config.sidecar.logging.level, config.sidecar.logging.format)


def check_address(value: str | None, what: str) -> None:
    """Exit 2 unless ``value`` is None or ``host:port``."""
    if value is None:
        return
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        click.echo(f"{what}: must be host:port, got {value!r}", err=True)
        sys.exit(EXIT_USAGE)


def fail_state(exc: Exception) -> NoReturn:
    """A state-database problem: one line naming the file and what to do, exit 3 (never a traceback); a state
    folder held by another process: one line naming the folder and the holder's pid, exit 4."""
    from sidecar.state import StateInUse

    click.echo(str(exc), err=True)
    sys.exit(EXIT_IN_USE if isinstance(exc, StateInUse) else EXIT_STATE)
