"""Shared helpers of the filter tests: build a filter from YAML-style options, make events."""

from __future__ import annotations

from pathlib import Path
from random import Random
from typing import Any

from sidecar.api import BuildContext, Event
from sidecar.codecs import SchemaConfig, TsvCodec
from sidecar.config import build_config, load_yaml
from sidecar.state import StateStore


def build_filter(cls: type, options: dict[str, Any], tmp: Path, state: StateStore | None = None) -> Any:
    """``cls`` built from ``options`` validated as the loader does (at ``filters[0].NAME``), seeded, in ``tmp``."""
    config = build_config(
        cls.Config, options, load_yaml("<test>", "{}"), f"filters[0].{cls.NAME}"
    )  # cls is a Filter subclass
    return cls(config, BuildContext(config_dir=tmp, state=state, rng=Random(1), seed=1))


def decode_tsv(text: str, limit: int | None = None) -> list[Event]:
    """Events of an AOL-format TSV log (header first); at most ``limit``; every line must decode."""
    codec = TsvCodec(SchemaConfig())
    lines = text.split("\n")
    codec.accept_header(lines[0])
    body = [line for line in lines[1:] if line][:limit]
    bad: list[tuple[int, str]] = []
    events = codec.decode_many(body, "\n", bad)
    assert not bad
    return events


def make_event(user: str = "u1", query: str = "q", url: str | None = None) -> Event:
    """An event without a record; rank is 1 when it has a URL."""
    return Event(user, query, "2006-03-01 00:00:00", "1" if url else "", url)
