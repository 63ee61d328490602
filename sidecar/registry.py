"""Plugin discovery through entry points (built-ins are registered the same way).

The groups are named in :mod:`sidecar.api` (``FILTERS``, ``SOURCES``, ``SINKS``,
``CODECS``, ``COMMANDS``). Two plugins under one name is an error naming both.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from sidecar.api import CODECS, COMMANDS, FILTERS, SINKS, SOURCES

__all__ = ["CODECS", "COMMANDS", "FILTERS", "SINKS", "SOURCES", "PluginError", "Plugins", "plugin_origin", "plugins"]


class PluginError(Exception):
    """A plugin cannot be loaded or is registered twice."""


class Plugins(MutableMapping[str, Any]):
    """A group's plugins by name, each loaded the first time it is looked up (a command imports only the components
    it uses: every registered plugin module imported at start cost a replay about 0.1 s, measured). Iterating
    names loads nothing; ``items()``/``values()`` load every plugin."""

    def __init__(self, group: str, found: dict[str, EntryPoint]) -> None:
        self.group = group
        self._entries: dict[str, EntryPoint | None] = dict(found)  # None: set directly (tests), never loaded
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name in self._loaded:
            return self._loaded[name]
        ep = self._entries[name]
        if ep is None:
            raise KeyError(name)
        try:
            value = ep.load()
        except Exception as exc:  # a broken third-party plugin must say which one
            raise PluginError(f"{self.group}: cannot load {name!r} from {ep.value}: {type(exc).__name__}") from exc
        self._loaded[name] = value
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __setitem__(self, name: str, value: Any) -> None:
        self._entries.setdefault(name, None)
        self._loaded[name] = value

    def __delitem__(self, name: str) -> None:
        del self._entries[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


@cache
def plugins(group: str) -> Plugins:
    """All plugins of a group, by name (each loaded when first looked up)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group):
        if ep.name in found:
            raise PluginError(f"{group}: {ep.name!r} is registered twice: {found[ep.name].value} and {ep.value}")
        found[ep.name] = ep
    return Plugins(group, found)


def plugin_origin(group: str, name: str) -> str:
    for ep in entry_points(group=group):
        if ep.name == name:
            return ep.value
    return ""
