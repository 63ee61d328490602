"""A third-party plugin set written only against ``sidecar.api`` (the contract page).

* ``KvCodec`` — records are ``key=value`` pairs separated by ``;`` (a made-up format).
* ``RedactDigitsFilter`` — replaces digits in the query with ``#``, and stamps a non-role field.
* ``HoldUntilFinalFilter`` — a buffering filter: holds every event (in memory) until the final flush.
* ``LinesSource`` — a finite source: the lines of a file, in batches, into the runtime.
* ``JsonLinesSink`` — one JSON object per event, fsynced at ``flush`` (the delivery point); ``reopen`` opens
  the file again by its path (logrotate's move + HUP).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sidecar.api import (
    ROLES,
    BadRecord,
    BuildContext,
    Codec,
    ConfigValueError,
    Event,
    FieldError,
    Filter,
    FilterConfig,
    RecordBatch,
    Runtime,
    Sink,
    SinkConfig,
    Source,
    SourceConfig,
    option,
)


class KvCodec(Codec):
    """``user=..;query=..;other=..`` lines; the roles are the keys named like them."""

    format = "kv"

    def _parse(self, line: str) -> dict[str, str]:
        pairs = [part.split("=", 1) for part in line.split(";") if part]
        if any(len(p) != 2 for p in pairs):
            raise BadRecord("not_key_value")
        return dict(pairs)

    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        out = []
        for i, line in enumerate(records):
            try:
                record = self._parse(line)
            except BadRecord as exc:
                bad.append((i, exc.reason))
                continue
            if "query" not in record:  # no query at all; an empty one (``query=``) is a valid event
                bad.append((i, "missing_query"))
                continue
            user, query, time, rank, url = (record.get(role) for role in ROLES)
            out.append(Event(user, query, time, rank, url, record=record, raw=line, codec=self, eol=eol))
        return out

    def encode(self, event: Event) -> str:
        record = event.record if event.codec is self else {}
        if event.raw is not None and all(record.get(r) == getattr(event, r) for r in ROLES if r in record):
            return event.raw  # the identity rule: unchanged roles give back the input bytes
        merged = {**record, **{r: str(getattr(event, r)) for r in ROLES if getattr(event, r) is not None}}
        return ";".join(f"{k}={v}" for k, v in merged.items())

    def fields(self, event: Event) -> Mapping[str, Any]:
        return {k: v for k, v in event.record.items() if k not in ROLES} if event.codec is self else {}

    def get_field(self, event: Event, name: str) -> Any:
        if event.codec is not self or name not in event.record:
            raise FieldError("no_such_field")
        return event.record[name]

    def set_field(self, event: Event, name: str, value: Any) -> None:
        if event.codec is not self:
            raise FieldError("unsupported_codec")
        if name in ROLES:
            raise FieldError("field_is_role")
        event.record = {**event.record, name: str(value)}
        event.mark_changed()  # raw no longer matches the record


@dataclass(frozen=True)
class RedactDigitsConfig(FilterConfig):
    """Options of ``redact_digits``."""

    mark: str = option("#", "What replaces each digit.")
    stamp_field: str | None = option(None, "Also set this non-role field to `redacted` when a query changed.")

    def __post_init__(self) -> None:
        if len(self.mark) != 1:
            raise ConfigValueError("mark", f"must be one character, got {len(self.mark)}")


class RedactDigitsFilter(Filter[RedactDigitsConfig]):
    """Replace digits in the query; count how many queries changed."""

    NAME = "redact_digits"
    Config = RedactDigitsConfig

    def __init__(self, config: RedactDigitsConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.digits = re.compile(r"\d")

    def process(self, batch: list[Event]) -> list[Event]:
        for ev in batch:
            new = self.digits.sub(self.config.mark, ev.query)
            if new != ev.query:
                ev.query = new
                self.counts["redacted"] += 1
                if self.config.stamp_field and ev.codec is not None:
                    try:
                        ev.codec.set_field(ev, self.config.stamp_field, "redacted")
                    except FieldError as exc:
                        self.counts[f"stamp_{exc.reason}"] += 1
        return batch


@dataclass(frozen=True)
class LinesSourceConfig(SourceConfig):
    """Options of the ``lines`` source."""

    path: str = option(doc="File of kv records, one per line (relative to the config file).")
    batch_size: int = option(2, "Records per batch.", min=1)


class LinesSource(Source[LinesSourceConfig]):
    """Reads every line of a file into the runtime, batch by batch; finite."""

    NAME = "lines"
    Config = LinesSourceConfig
    FINITE = True

    def __init__(self, config: LinesSourceConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.stopped = False
        self.acknowledged = 0

    def start(self, runtime: Runtime) -> None:
        path = self.ctx.resolve(self.config.path)
        lines = path.read_text(encoding="utf-8").splitlines()
        codec = KvCodec()
        size = self.config.batch_size
        for first in range(0, len(lines), size):
            if self.stopped:
                break
            chunk = lines[first : first + size]
            receipt = runtime.receive(
                RecordBatch(chunk, codec, str(path), list(range(first + 1, first + 1 + len(chunk))))
            )
            self.acknowledged += receipt.accepted + receipt.dead_lettered  # durable: safe to acknowledge now

    def stop(self, grace: float | None = None) -> None:
        self.stopped = True


class HoldUntilFinalFilter(Filter[FilterConfig]):
    """Holds every event until the final flush (shutdown), which lets all of them go: a buffering filter."""

    NAME = "hold_until_final"
    BUFFERING = True

    def __init__(self, config: FilterConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.buffer: list[Event] = []

    def process(self, batch: list[Event]) -> list[Event]:
        self.buffer.extend(batch)
        return []

    def flush(self, final: bool) -> list[Event]:
        if not final:
            return []
        out, self.buffer = self.buffer, []
        return out

    def held(self) -> int:
        return len(self.buffer)


@dataclass(frozen=True)
class JsonLinesSinkConfig(SinkConfig):
    """Options of the ``json_lines`` sink."""

    path: str = option(doc="Output file (relative to the config file); appended to.")


class JsonLinesSink(Sink[JsonLinesSinkConfig]):
    """The roles of each event plus its encoded record, one JSON object per line; fsync at flush."""

    NAME = "json_lines"
    Config = JsonLinesSinkConfig

    def __init__(self, config: JsonLinesSinkConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.file = open(ctx.resolve(config.path), "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, events: list[Event]) -> None:
        for ev in events:
            record = ev.codec.encode(ev) if ev.codec is not None else None
            self.file.write(json.dumps({"user": ev.user, "query": ev.query, "record": record}) + "\n")
            self.written += 1

    def flush(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())

    def reopen(self) -> None:
        """The file again by its path: a new one after logrotate moved it; the old one gets what was written."""
        new = open(self.ctx.resolve(self.config.path), "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.flush()
        old, self.file = self.file, new
        old.close()

    def close(self) -> None:
        self.flush()
        self.file.close()
