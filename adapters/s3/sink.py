"""The ``s3`` sink: records archived as gzip objects in an S3 bucket, staged durably, uploaded through an outbox.

* ``write`` encodes events as the file sink writes them (:mod:`adapters.s3.encoding`); ``flush`` stages the
  lines in the state database (:mod:`adapters.s3.staging`, a SAVEPOINT of the runtime's transaction): once the
  batch commits they are durable, so the source may acknowledge them.
* A closer thread cuts objects: when the staged records reach ``max_object_bytes`` or the oldest is
  ``max_object_seconds`` old (or at ``close``), it reads the oldest rows (holding the store's lock: committed rows
  only), gzips them outside the lock, then in one SAVEPOINT puts the object into the outbox and deletes its rows:
  a record is in exactly one of the two, whatever the moment of a kill -9.
* The object's key is fixed when it enters the outbox: ``<prefix with strftime filled><UTC time>-<run id>-<seq>``
  (the run id: 8 random bytes of this start, the sequence: this run's objects). Two objects never share a key;
  the outbox's sender uploads an object at least once and a retry writes the same key with the same bytes, so
  one object is never stored under two names. Uploads (:mod:`adapters.s3.upload`) are multipart above
  ``multipart_threshold_bytes``; any failure leaves the object in the outbox, sent again after a backoff.

Logs and errors carry counts, S3 error codes and exception type names only: never a key's records or a value.
"""

from __future__ import annotations

import gzip
import secrets
import threading
import time
from collections import Counter
from typing import Any

import msgpack
import structlog

from adapters.s3.config import S3SinkConfig
from adapters.s3.encoding import ObjectLines
from adapters.s3.staging import ObjectRows, Staging
from adapters.s3.upload import Uploader, UploadFailed, credentials, require_boto3
from sidecar.api import Backpressure, BuildContext, Codec, ConfigValueError, Event, Outbox, Sink
from sidecar.codecs import SchemaConfig
from sidecar.netsink import PeerUnavailable, outbox_stats

log = structlog.get_logger("querylog.s3")

#: Longest nap of the closer thread between looks at the staged records (a flush wakes it sooner).
IDLE_WAIT = 5.0


class S3Sink(Sink[S3SinkConfig]):
    """Gzip objects of released records in an S3 bucket, closed by size or age, uploaded at least once."""

    NAME = "s3"
    Config = S3SinkConfig
    SUMMARY = "gzip objects in an S3 bucket (date-placed keys, closed by size or age), via an outbox ([s3] extra)"

    def __init__(self, config: S3SinkConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        require_boto3()
        try:
            time.strftime(config.prefix, time.gmtime(0))
        except ValueError:
            raise ConfigValueError("prefix", "not a valid strftime pattern") from None
        credentials(config, ctx)  # a variable that is not set, a file that cannot be read: reported now
        schema = ctx.schema or SchemaConfig()
        fmt: str | None = config.format if config.format != "auto" else None
        if fmt is None and schema.format != "auto":
            fmt = schema.format
        self.encoder = ObjectLines(schema, fmt, ctx.dead_letters, f"sink:{self.NAME}")
        #: counts only: objects closed and uploaded, closes refused by a full outbox
        self.counts: Counter[str] = Counter()
        self._pending: list[bytes] = []
        self._pending_events = 0
        self._staged_bytes = 0  # as this process last saw them (metrics, and when to wake the closer)
        self._staged_events = 0
        self._run_id = secrets.token_hex(8)  # never seeded: a seeded run (tests, --seed) must not repeat names
        self._seq = 0
        self._ready: tuple[list[int], bytes, int] | None = None  # an object compressed but refused by a full outbox
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._closer: threading.Thread | None = None
        self.outbox: Outbox | None = None
        self.staging: Staging | None = None
        self.uploader: Uploader | None = None
        if ctx.validate_only:
            return
        if ctx.state is None:
            raise ConfigValueError("bucket", "the s3 sink stages records in the state store: it needs the runtime")
        name = config.outbox_name or ("s3_" + "".join(c if c.isalnum() else "_" for c in config.bucket + config.prefix))
        name = name[:64]
        self.uploader = Uploader(config, ctx)
        self.staging = Staging(ctx.state, name)  # here: never inside the runtime's transaction
        self.outbox = ctx.outbox(name, config)
        self.outbox.start(self.send)  # objects an earlier run left go out at once
        self._closer = threading.Thread(target=self._run, name=f"querylog-s3-{name}", daemon=True)
        self._closer.start()  # records an earlier run staged are closed when due

    # ---- the runtime's side -----------------------------------------------------------------------
    def start(self, header: str | None, codec: Codec | None) -> None:
        self.encoder.start(header, codec)

    def write(self, events: list[Event]) -> None:
        if not events:
            return
        if self.staging is None:
            raise RuntimeError("the s3 sink was built to check a config only")
        lines, n = self.encoder.object_lines(events)
        if n:
            self._pending.append(lines)
            self._pending_events += n
            self.written += n

    def flush(self) -> None:
        """Stage what was written: durable when the runtime's batch commits."""
        if not self._pending or self.staging is None:
            return
        lines = b"".join(self._pending)
        self.staging.add(self.ctx.clock(), self._pending_events, self.encoder.header, lines)
        was_empty = not self._staged_bytes
        self._staged_bytes += len(lines)
        self._staged_events += self._pending_events
        self._pending.clear()
        self._pending_events = 0
        if was_empty or self._staged_bytes >= self.config.max_object_bytes:
            self._wake.set()

    # ---- the closer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()  # before looking: a flush that wakes it meanwhile cuts the wait short
            try:
                wait = self._close_due(final=False)
            except Backpressure:
                self.counts["closes_refused_full"] += 1
                wait = self.config.retry_initial_seconds
            except Exception as exc:  # the state database: look again later
                log.error("s3_close_failed", sink=self.NAME, error=type(exc).__name__)
                wait = self.config.retry_max_seconds
            if wait:
                self._wake.wait(wait)

    def _close_due(self, final: bool) -> float:
        """Close one object if one is due (``final``: whatever is staged); 0.0 when it did, else seconds to wait."""
        staging, state = self.staging, self.ctx.state
        assert staging is not None and state is not None
        with state.lock:  # no runtime transaction is open while this is held: committed rows only
            staged = staging.staged()
            self._staged_bytes = staged.bytes
            if staged.oldest is None:
                self._staged_events = 0
                return IDLE_WAIT
            age = self.ctx.clock() - staged.oldest
            if not final and staged.bytes < self.config.max_object_bytes and age < self.config.max_object_seconds:
                return min(IDLE_WAIT, max(0.01, self.config.max_object_seconds - age))
            rows = staging.next_object(self.config.max_object_bytes)
        if rows is None:
            return IDLE_WAIT
        self._put_object(rows)
        return 0.0

    def _put_object(self, rows: ObjectRows) -> None:
        """Compress the rows into an object (outside the lock), then move them into the outbox in one SAVEPOINT."""
        staging, state, outbox = self.staging, self.ctx.state, self.outbox
        assert staging is not None and state is not None and outbox is not None
        ready = self._ready
        if ready is None or ready[0] != rows.ids:
            body = gzip.compress(
                rows.header.encode("utf-8") + b"".join(rows.lines), self.config.compresslevel, mtime=int(rows.created)
            )
            self._seq += 1
            ready = (rows.ids, msgpack.packb([self._key(rows.created), rows.events, body]), rows.events)
        self._ready = ready
        with state.lock:
            conn = state.conn
            conn.execute("SAVEPOINT s3_object")
            try:
                outbox.put(ready[1], ready[2])  # OutboxFull: the rows stay staged, tried again later
                staging.delete(rows.ids)
            except BaseException:
                conn.execute("ROLLBACK TO s3_object")
                conn.execute("RELEASE s3_object")
                raise
            conn.execute("RELEASE s3_object")
        self._ready = None
        self.counts["objects_closed"] += 1
        self._staged_events = max(0, self._staged_events - rows.events)

    def _key(self, created: float) -> str:
        when = time.gmtime(created)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", when)
        name = f"{stamp}-{self._run_id}-{self._seq:06d}.{self.encoder.extension()}.gz"
        return time.strftime(self.config.prefix, when) + name

    # ---- the outbox's sender thread ---------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        """Upload one object; returns once S3 stored it, raises to have it sent again (same key, same bytes)."""
        if self.uploader is None:
            raise PeerUnavailable("the sink is closing")
        key, events, body = msgpack.unpackb(payload)
        try:
            self.uploader.put(str(key), bytes(body), {"querylog-events": str(int(events))})
        except UploadFailed as exc:  # the S3 error code (AccessDenied, NoSuchBucket...) for the operator
            self.counts["upload_failures"] += 1
            log.warning("s3_upload_failed", sink=self.NAME, bucket=self.config.bucket, error=exc.code, events=events)
            raise
        self.counts["objects_uploaded"] += 1

    def stats(self) -> dict[str, Any]:
        """The outbox's counters and this sink's; ``pending_events`` counts staged records too (counts only)."""
        out = outbox_stats(self.counts, self.outbox)
        out["staged_bytes"] = self._staged_bytes
        out["staged_events"] = self._staged_events
        out["pending_events"] = int(out.get("pending_events", 0)) + self._staged_events
        out["records_rejected"] = self.encoder.rejected
        return out

    def close(self) -> None:
        """Stage what is written, close an object of everything staged, keep uploading for
        ``close_drain_seconds``; what is left stays in the state database for the next start."""
        outbox, closer = self.outbox, self._closer
        if outbox is None or closer is None:
            return
        try:
            self.flush()
        finally:
            self._stopping.set()
            self._wake.set()
            closer.join()
            self._closer = None
        try:
            while self._close_due(final=True) == 0.0:
                pass
        except Backpressure:
            log.error("s3_objects_left_staged", sink=self.NAME, events=self._staged_events, reason="outbox_full")
        finally:
            if self.config.close_drain_seconds:
                outbox.drain(self.config.close_drain_seconds)
            outbox.close(timeout=self.config.timeout_seconds + 5.0)
            self.outbox = None
            uploader, self.uploader = self.uploader, None
            if uploader is not None:
                uploader.close()
