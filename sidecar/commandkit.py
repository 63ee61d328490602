"""What every ``querylog`` command shares: load a config or exit 2 with its located error, set up logs.

Commands register under the entry-point group ``querylog.commands`` (see
:mod:`sidecar.api`); they use these helpers so every command reports config
errors the same way.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from importlib import metadata
from typing import Any, NoReturn, TypeVar

import click

from sidecar.config import ConfigError, LoadedConfig, load_config
from sidecar.logs import configure_logging

#: Exit status for a bad config, a bad option value or an input that cannot be used.
EXIT_USAGE = 2
#: The distribution whose extras ([audit], [microaggregate], [bench], [dask]) carry the offline tools' dependencies.
DISTRIBUTION = "querylog-sidecar"
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


_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")


def _normal(name: str) -> str:
    """A distribution or extra name as packaging compares them (PEP 503 / 685)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_for_extra(extra: str, dist: str = DISTRIBUTION) -> list[str]:
    """Names of the distributions that ``dist[extra]`` requires and that are not installed (``[]``: all are).

    Reads the installed metadata: an extra that names others (``querylog-sidecar[audit,microaggregate]``) is
    followed, and so is a dependency's own extra (``dask[distributed]``). Only the ``extra == "..."`` part of a
    marker is read (the project's extras have no other markers). Nothing is missing when ``dist`` itself is not
    installed (a source checkout run without an install has no extras to name).
    """
    try:
        requires = metadata.distribution(dist).requires or []
    except metadata.PackageNotFoundError:
        return []
    missing: list[str] = []
    seen = {(_normal(dist), _normal(extra))}
    todo = [(requires, _normal(extra))]
    while todo:
        reqs, wanted = todo.pop()
        for req in reqs:
            spec, _, marker = req.partition(";")
            tag = _EXTRA_MARKER.search(marker)
            found = _NAME.match(spec)
            if tag is None or _normal(tag.group(1)) != wanted or found is None:
                continue
            name, extras = found.group(1), [e.strip() for e in (found.group(2) or "").split(",") if e.strip()]
            try:
                nested = metadata.distribution(name).requires or []
            except metadata.PackageNotFoundError:
                missing.append(name)
                continue
            for sub in extras:
                if (_normal(name), _normal(sub)) not in seen:
                    seen.add((_normal(name), _normal(sub)))
                    todo.append((nested, _normal(sub)))
    return sorted(set(missing), key=_normal)


def extra_message(command: str, extra: str, dist: str = DISTRIBUTION) -> str:
    """The one line a command prints when its extra is not installed."""
    return f"{command}: needs the [{extra}] extra: pip install '{dist}[{extra}]'"


def require_extras(command: str, *extras: str, dist: str = DISTRIBUTION) -> None:
    """Exit 2 with one line naming the first extra of ``extras`` whose dependencies are not all installed."""
    for extra in extras:
        if missing_for_extra(extra, dist):
            click.echo(extra_message(command, extra, dist), err=True)
            sys.exit(EXIT_USAGE)


_C = TypeVar("_C", bound=click.Command)


def needs_extras(*extras: str) -> Callable[[_C], _C]:
    """Decorate a click command (below ``@click.command``) that needs these extras: when one is not installed,
    running it prints the line of :func:`extra_message` and exits 2 before its body runs (its help still shows).

    A top-level command says the same through its entry point instead (``"module:command [audit]"``), which
    ``querylog`` checks before importing the module.
    """

    def wrap(command: _C) -> _C:
        body = command.callback
        if body is None:
            return command

        @functools.wraps(body)
        def checked(*args: Any, **kwargs: Any) -> Any:
            require_extras(click.get_current_context().command_path, *extras)
            return body(*args, **kwargs)

        command.callback = checked
        return command

    return wrap
