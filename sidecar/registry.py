"""Plugin discovery through entry points (built-ins are registered the same way).

The groups are named in :mod:`sidecar.api` (``FILTERS``, ``SOURCES``, ``SINKS``,
``CODECS``, ``COMMANDS``). Two plugins under one name is an error naming both.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import Any

from sidecar.api import CODECS, COMMANDS, FILTERS, SINKS, SOURCES

__all__ = ["CODECS", "COMMANDS", "FILTERS", "SINKS", "SOURCES", "PluginError", "plugin_origin", "plugins"]


class PluginError(Exception):
    """A plugin cannot be loaded or is registered twice."""


@cache
def plugins(group: str) -> dict[str, Any]:
    """All plugins of a group, by name, loaded."""
    found: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for ep in entry_points(group=group):
        if ep.name in found:
            raise PluginError(f"{group}: {ep.name!r} is registered twice: {origin[ep.name]} and {ep.value}")
        try:
            found[ep.name] = ep.load()
        except Exception as exc:  # a broken third-party plugin must say which one
            raise PluginError(f"{group}: cannot load {ep.name!r} from {ep.value}: {type(exc).__name__}") from exc
        origin[ep.name] = ep.value
    return found


def plugin_origin(group: str, name: str) -> str:
    for ep in entry_points(group=group):
        if ep.name == name:
            return ep.value
    return ""
