"""Declaring options: :func:`option`, the config bases, the record schema, and ``ConfigValueError``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sidecar.api.events import ROLES


def option(default: Any = dataclasses.MISSING, doc: str = "", **checks: Any) -> Any:
    """Declare a config field: its default, its documentation and its checks.

    Checks understood by the loader: ``min``/``max`` (inclusive bounds),
    ``gt`` (strict lower bound), ``choices`` (allowed values), ``secret_ref``
    (the value names an env var or file, never a secret itself).
    """
    meta = {"doc": doc, **checks}
    if isinstance(default, list | dict | set):
        raise TypeError("use an immutable default (tuple) for config options")
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class FilterConfig:
    """Base of filter configs: frozen dataclasses of :func:`option` fields."""


@dataclass(frozen=True)
class SourceConfig:
    """Base of source configs."""


@dataclass(frozen=True)
class SinkConfig:
    """Base of sink configs."""


class ConfigValueError(ValueError):
    """A config value is wrong. ``key`` is relative to the component's mapping."""

    def __init__(self, key: str, problem: str, allowed: Sequence[Any] | None = None) -> None:
        super().__init__(problem)
        self.key = key
        self.problem = problem
        self.allowed = allowed


AOL_COLUMNS = ("AnonID", "Query", "QueryTime", "ItemRank", "ClickURL")


@dataclass(frozen=True)
class RolesConfig:
    """Which record field plays each role (AOL defaults)."""

    user: str = option("AnonID", "Field holding the user id.")
    query: str = option("Query", "Field holding the query text.")
    time: str | None = option("QueryTime", "Field holding the event time (null: none).")
    rank: str | None = option("ItemRank", "Field holding the clicked result's rank (null: none).")
    url: str | None = option("ClickURL", "Field holding the clicked URL (null: none).")

    def mapping(self) -> dict[str, str | None]:
        return {role: getattr(self, role) for role in ROLES}


@dataclass(frozen=True)
class SchemaConfig:
    """How input records look. Output uses the same schema."""

    format: Literal["auto", "tsv", "jsonl"] = option(
        "auto",
        "Record format; auto picks by file extension (.tsv/.txt -> tsv, .jsonl/.json/.ndjson -> jsonl).",
    )
    header: bool = option(True, "TSV: the first line is a header naming the columns (kept in the output).")
    columns: tuple[str, ...] = option(AOL_COLUMNS, "TSV: column names when there is no header line.")
    roles: RolesConfig = option(RolesConfig(), "Record field of each role.")

    def __post_init__(self) -> None:
        if not self.header and len(set(self.columns)) != len(self.columns):
            raise ConfigValueError("columns", "column names must be unique")
