"""The ``nats`` sink: events published to NATS JetStream through a durable outbox, acknowledged by JetStream.

``write`` encodes each event as one line in the input's text format (the input's own codec: an unchanged
record leaves byte for byte; an event of another format as a JSON line; a UBI record, ``format: ubi``, as its own
JSON line: its keys, their order and nesting, whatever source brought it) and picks its subject (``subject``, or
``<subject>.<p>`` with ``p`` the partition of its user among ``partition_count``); batches of ``batch_size``
events become messages of up to ``records_per_message`` lines of one subject (in order), each with a
``Nats-Msg-Id`` (this sink's random run id and a counter); ``flush`` puts them into the outbox
(``ctx.outbox``), committed with the runtime's batch. The outbox's sender thread publishes a batch
(:class:`~adapters.nats.jetstream.Publisher`: each message with a reply subject of its own) and waits for
every JetStream publish acknowledgement:

* every message stored (or reported a duplicate: JetStream saw its ``Nats-Msg-Id`` within the stream's
  ``duplicate_window``, 2 minutes by default): delivered;
* any message without an acknowledgement in ``timeout_seconds`` (no server, no stream for the subject, a
  stream refusing it for now): the whole batch is sent again after the outbox's backoff, with the same
  message ids, so JetStream stores a message twice only when the retry comes after the duplicate window;
* a message larger than the server's ``max_payload``: sent line by line (ids ``<id>.<i>``); a line larger
  than it is dead-lettered (``nats_max_payload``), the others sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

import msgpack
import structlog

from adapters.nats.config import NatsSinkConfig
from adapters.nats.jetstream import LoopThread, Publisher, ensure_stream
from adapters.nats.partition import PartitionKeyError, partition_key, subject_for
from sidecar.api import Backpressure, BadRecord, BuildContext, Codec, ConfigValueError, Event, Outbox, Sink
from sidecar.netsink import PeerUnavailable, dead_letter_event, outbox_stats
from sidecar.records import breaks_framing

if TYPE_CHECKING:
    from nats.aio.client import Client

log = structlog.get_logger("querylog.nats")

#: Text formats whose codec writes one line per event (kept as they are); others are written as JSON lines.
TEXT_FORMATS = frozenset({"tsv", "jsonl", "access_log"})
#: Most bytes of record lines in one message (the server's default ``max_payload`` is 1 MiB).
MESSAGE_BYTES = 256 * 1024


class NatsSink(Sink[NatsSinkConfig]):
    """Events to NATS JetStream (publish acks), partitioned by user when asked, through a durable outbox."""

    NAME = "nats"
    Config = NatsSinkConfig
    SUMMARY = "NATS JetStream publisher (publish acks, Nats-Msg-Id dedup), partitioned by user hash, via an outbox"

    def __init__(self, config: NatsSinkConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.options = config.connect_options(ctx)
        try:
            self.key = partition_key() if config.partition_count else b""
        except PartitionKeyError as exc:  # the environment's key is unusable: say so at the option using it
            raise ConfigValueError("partition_count", str(exc)) from None
        #: counts only: events dead-lettered by reason, batches published, duplicates JetStream reported
        self.counts: Counter[str] = Counter()
        self.codec: Codec | None = None
        self._pending: list[tuple[str, bytes]] = []  # (subject, record line) not yet in the outbox
        self._run_id = ctx.token_bytes(8).hex()
        self._seq = 0
        self._closing = threading.Event()
        self._nc: Client | None = None
        self._publisher: Publisher | None = None
        self._loop: LoopThread | None = None
        self.outbox: Outbox | None = None
        if ctx.validate_only:
            return
        self._loop = LoopThread("nats-sink")
        name = config.outbox_name or "nats_" + "".join(c if c.isalnum() else "_" for c in config.subject)[-59:]
        self.outbox = ctx.outbox(name, config)
        self.outbox.start(self.send)  # batches an earlier run left go out at once

    # ---- the runtime's side -----------------------------------------------------------------------
    def start(self, header: str | None, codec: Codec | None) -> None:
        """A text input keeps its codec (lines leave as they came); any other is written as JSON lines."""
        self.codec = codec if codec is not None and codec.format in TEXT_FORMATS else self.ctx.codec_for("jsonl")
        if self.codec is None:
            raise RuntimeError("the nats sink needs the runtime's JSON-lines codec (ctx.codec_for('jsonl'))")

    def write(self, events: list[Event]) -> None:
        if not events:
            return
        if self.outbox is None:
            raise RuntimeError("the nats sink was built to check a config only")
        if self.codec is None:
            self.start(None, None)
        assert self.codec is not None
        encode, cfg = self.codec.encode, self.config
        last: Codec | None = None  # the codec of the event before, and whether its records are JSON objects
        objects = False
        for ev in events:
            own = ev.codec
            if own is not last:
                last, objects = own, bool(getattr(own, "json_records", False))
            try:
                # a record that is a JSON object of its own (format: ubi) leaves as it came: its keys, order, nesting
                text = own.encode(ev) if objects and own is not None else encode(ev)
            except (BadRecord, TypeError, ValueError) as exc:
                self._reject(ev, exc.reason if isinstance(exc, BadRecord) else "unencodable_record")
                continue
            if breaks_framing(text):  # the consumer reads a message's lines as records
                self._reject(ev, "field_breaks_framing")
                continue
            subject = (
                subject_for(ev.user, cfg.subject, cfg.partition_count, self.key) if cfg.partition_count else cfg.subject
            )
            self._pending.append((subject, text.encode("utf-8")))
            self.written += 1
        self._put(partial=False)

    def _reject(self, ev: Event, reason: str) -> None:
        self.counts[reason] += 1
        dead_letter_event(self.ctx.dead_letters, reason, f"sink:{self.NAME}", ev)

    def _put(self, partial: bool) -> None:
        """Full batches (``partial``: the last one too) into the outbox; on Backpressure the rest stays pending."""
        assert self.outbox is not None
        size = self.config.batch_size
        while self._pending and (partial or len(self._pending) >= size):
            chunk = self._pending[:size]
            self.outbox.put(msgpack.packb(self._messages(chunk)), len(chunk))
            del self._pending[: len(chunk)]

    def _messages(self, records: list[tuple[str, bytes]]) -> list[tuple[str, str, bytes]]:
        """``(subject, Nats-Msg-Id, data)`` messages of a batch's records: up to ``records_per_message`` lines
        of one subject (in their order, ``MESSAGE_BYTES`` at most) per message, each with an id of its own."""
        per = self.config.records_per_message
        groups: dict[str, list[list[bytes]]] = {}
        sizes: dict[str, int] = {}
        for subject, data in records:
            messages = groups.setdefault(subject, [[]])
            if len(messages[-1]) >= per or (messages[-1] and sizes[subject] + len(data) >= MESSAGE_BYTES):
                messages.append([])
                sizes[subject] = 0
            messages[-1].append(data)
            sizes[subject] = sizes.get(subject, 0) + len(data) + 1
        out = []
        for subject, messages in groups.items():
            for lines in messages:
                self._seq += 1
                out.append((subject, f"{self._run_id}-{self._seq}", b"\n".join(lines)))
        return out

    def flush(self) -> None:
        """Put everything pending into the outbox: durable when this returns."""
        if self.outbox is not None:
            self._put(partial=True)

    # ---- the sender thread ------------------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        """Publish one batch; returns once JetStream acknowledged every message, raises to have it retried."""
        if self._closing.is_set() or self._loop is None:
            raise PeerUnavailable("the sink is closing")  # the batch stays in the outbox for the next start
        items = [(str(s), str(m), bytes(d)) for s, m, d in msgpack.unpackb(payload)]
        wait = self.config.timeout_seconds + self.config.connect_timeout_seconds + 5.0
        try:
            self._loop.call(self._publish(items), timeout=wait)
        except PeerUnavailable:
            raise
        except Exception as exc:  # no server, a timeout...: retried with the same message ids
            raise PeerUnavailable(f"nats: {type(exc).__name__}") from None

    async def _connect(self) -> Publisher:
        import nats

        if self._nc is not None and not self._nc.is_closed and self._publisher is not None:
            return self._publisher
        self._nc = await asyncio.wait_for(
            nats.connect(**self.options, error_cb=self._error), self.config.connect_wait()
        )
        cfg = self.config
        if cfg.create_stream and cfg.stream is not None:
            await ensure_stream(self._nc.jetstream(), cfg.stream, [cfg.subject, f"{cfg.subject}.*"])
        self._publisher = Publisher(self._nc)
        await self._publisher.start()
        return self._publisher

    async def _publish(self, items: list[tuple[str, str, bytes]]) -> None:
        from nats.errors import MaxPayloadError

        publisher = await self._connect()
        limit = (self._nc.max_payload if self._nc is not None else 1 << 20) - 256
        fits: list[tuple[str, str, bytes]] = []
        refused = self.counts["nats_max_payload"]
        for subject, msg_id, data in items:
            if len(data) <= limit:
                fits.append((subject, msg_id, data))
            else:  # a message of several lines goes line by line (ids fixed by position), a line too large nowhere
                fits.extend(self._split(subject, msg_id, data, limit))
        if self.counts["nats_max_payload"] > refused and self.ctx.dead_letters is not None:
            self.ctx.dead_letters.flush()
        try:
            stored, duplicates, refused = await publisher.publish(fits, self.config.stream, self.config.timeout_seconds)
        except (TimeoutError, MaxPayloadError) as exc:
            self.counts["batches_timed_out"] += 1
            raise PeerUnavailable(f"nats: publish acknowledgements missing ({type(exc).__name__})") from None
        self.counts["duplicates_reported"] += duplicates
        if refused:  # no stream for the subject, a stream refusing for now: the whole batch again, same ids
            self.counts["batches_failed"] += 1
            raise PeerUnavailable(f"nats: {refused} messages not stored")
        self.counts["batches_published"] += 1
        self.counts["messages_stored"] += stored

    def _split(self, subject: str, msg_id: str, data: bytes, limit: int) -> list[tuple[str, str, bytes]]:
        """A message over the server's ``max_payload``: its lines as messages ``<id>.<i>``; a line over it is
        dead-lettered (``nats_max_payload``: no server takes it, it is never sent again)."""
        out = []
        for i, line in enumerate(data.split(b"\n")):
            if len(line) <= limit:
                out.append((subject, f"{msg_id}.{i}", line))
                continue
            self.counts["nats_max_payload"] += 1
            if self.ctx.dead_letters is not None:
                self.ctx.dead_letters.add("nats_max_payload", f"sink:{self.NAME}", None, line)
        return out

    async def _error(self, exc: Exception) -> None:
        self.counts["connection_errors"] += 1
        log.warning("nats_connection_error", sink=self.NAME, error=type(exc).__name__)

    def stats(self) -> dict[str, Any]:
        """The outbox's counters and this sink's (counts only)."""
        return outbox_stats(self.counts, self.outbox)

    def close(self) -> None:
        """Put what is pending into the outbox, keep sending for ``close_drain_seconds``, stop the sender."""
        outbox, loop = self.outbox, self._loop
        if outbox is None or loop is None:
            return
        try:
            self.flush()
        except Backpressure:
            log.error("events_not_stored_at_close", sink=self.NAME, events=len(self._pending), reason="outbox_full")
        if self.config.close_drain_seconds:
            outbox.drain(self.config.close_drain_seconds)
        self._closing.set()
        outbox.close(timeout=self.config.timeout_seconds)
        self.outbox = None
        nc = self._nc
        if nc is not None:
            with contextlib.suppress(Exception):
                loop.call(nc.close(), timeout=5.0)
        loop.close()
        self._loop = None
