"""Fields of a nested JSON object by dotted path (``event_attributes.object.object_id``).

A UBI record nests what matters most (the clicked object's id and description) two levels deep, so a field policy
must reach it: :func:`leaves` names every leaf by its path (a list is one leaf), :func:`get_path`,
:func:`with_path` and :func:`without_path` read and rewrite one (copying the objects on the way: a record shared
with the original line is never edited in place). A top-level key that itself holds a dot is found by its name
first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["MISSING", "get_path", "leaves", "with_path", "without_path"]

MISSING: Any = object()
"""What :func:`get_path` returns for a path the record does not have."""


def leaves(record: dict[str, Any], skip: frozenset[str] = frozenset(), prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, value)`` of every leaf under ``record`` in key order; top-level keys in ``skip`` are left out.
    An empty object is a leaf of its own (a policy can still drop it)."""
    for key, value in record.items():
        if not prefix and key in skip:
            continue
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from leaves(value, frozenset(), path + ".")
        else:
            yield path, value


def _steps(record: dict[str, Any], path: str) -> list[str] | None:
    """The keys leading to ``path`` (the whole path when it is a top-level key), None when there is none."""
    if path in record:
        return [path]
    steps = path.split(".")
    node: Any = record
    for step in steps:
        if not isinstance(node, dict) or step not in node:
            return None
        node = node[step]
    return steps


def get_path(record: dict[str, Any], path: str) -> Any:
    """The value at ``path``, or :data:`MISSING`."""
    steps = _steps(record, path)
    if steps is None:
        return MISSING
    node: Any = record
    for step in steps:
        node = node[step]
    return node


def with_path(record: dict[str, Any], path: str, value: Any) -> dict[str, Any] | None:
    """A copy of ``record`` with ``value`` at ``path`` (key order kept); None when the path does not exist."""
    steps = _steps(record, path)
    if steps is None:
        return None
    return _rebuilt(record, steps, value, remove=False)


def without_path(record: dict[str, Any], path: str) -> dict[str, Any]:
    """A copy of ``record`` without the leaf at ``path`` (the record itself when there is none)."""
    steps = _steps(record, path)
    if steps is None:
        return record
    return _rebuilt(record, steps, None, remove=True)


def _rebuilt(node: dict[str, Any], steps: list[str], value: Any, *, remove: bool) -> dict[str, Any]:
    head, rest = steps[0], steps[1:]
    if not rest:
        if remove:
            return {k: v for k, v in node.items() if k != head}
        return {**node, head: value}
    return {**node, head: _rebuilt(node[head], rest, value, remove=remove)}
