"""The ``http`` source: JSON records (NDJSON, a JSON array, msgpack) over HTTP POST into the runtime.

**What a sender gets back** (Vector's ``http`` sink and Fluent Bit's ``http`` output retry on 5xx and drop
on 4xx, so the status says whether sending again can help):

* **200** once every record of the body is durable: ``runtime.receive`` returned (the events are delivered
  to the sinks, in a sink's durable outbox, held by a filter or dropped by rule) and the bad records are in
  the dead-letter file. A body with some bad records is answered 200 too, as long as at least one was taken:
  sending it again could only duplicate the good ones, the bad ones would fail again. The JSON body counts
  them: ``{"accepted": 3, "dead_lettered": 1, "delivered": 3, "held": 0, "dropped": 0,
  "reasons": {"invalid_json": 1}}``. An empty body is a 200 with zero counts.
* **400** when no record of the body could be taken (every one bad: the same counts and reasons; they are
  dead-lettered), or the body cannot be read at all (``invalid_gzip``, ``invalid_chunked_body``, a chunk size
  the parser refuses such as ``-1``: ``bad_request``; a JSON array nested too deep: ``json_too_deep``).
* **401** without the right ``Authorization: Bearer <token>`` (when a token is configured), **404** for
  another path, **405** for another method, **408** for a body that stopped arriving or did not arrive whole
  within ``body_timeout_seconds``, **411** without a length, **413** for a body over ``max_body_bytes`` (as
  sent or decompressed, chunked or not), **415** for another content type or encoding (the JSON body's
  ``accepted`` lists the accepted ones, as do ``Accept-Post`` or ``Accept-Encoding``).
* **503** with ``Retry-After`` when the sinks cannot take the events now: a sink's outbox is full
  (:class:`~sidecar.api.Backpressure`, before the chain runs), or ``receive`` failed (a sink or the state
  database refused: a full disk...). Nothing of that body was acknowledged; the sender sends it again.

Bodies: ``Content-Type`` ``application/x-ndjson`` (also ``application/json``, ``application/jsonlines``,
``application/x-jsonlines`` or none): one JSON object per line, blank lines skipped; an ``application/json``
body that is one JSON array of objects (Vector's ``http`` sink with the ``json`` codec, Fluent Bit's ``format
json``) is taken as those objects; ``application/msgpack`` (also ``x-msgpack``, ``vnd.msgpack``; Fluent Bit's
``http`` output by default): a stream of maps, or of ``[time, map]`` / ``[[time, metadata], map]`` entries, each
map taken as a JSON object; ``text/plain`` (Vector's ``text`` codec, syslog-ng's ``body("${MSG}")``): one record
per line in the schema's format, TSV of ``schema.columns`` (a line that is exactly their header is skipped) or
JSON lines; with ``format: auto`` JSON lines when the first line starts with ``{``, else TSV. A schema format
whose codec reads JSON objects itself (``json_records``: ``format: ubi``) reads the objects of every body kind.
``Content-Encoding`` ``gzip`` (several members too), ``deflate`` or ``identity``;
``Content-Length`` or chunked. See :mod:`adapters.http.body` for the reasons a record is dead-lettered here;
the runtime's codec dead-letters lines that are not a record (``invalid_json``, ``missing_query``...).

``GET /health`` answers 200 ``{"status": "ok", "backpressure": null}`` (the name of a full outbox instead
of null while the sinks refuse), without a token; 503 while stopping.

The server runs on the shared host (:mod:`sidecar.serving`, :mod:`adapters.http.server`): connections are
coroutines on one event loop (idle ones cost no thread), bodies are taken on the host's workers. Nothing it
logs carries a request line, a header value or a record: counts by reason only.
"""

from __future__ import annotations

import hmac
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

import structlog

from adapters.http.body import Answer, BodyError, decompress, msgpack_records, split_records, text_format
from adapters.http.config import HttpSourceConfig
from sidecar.api import (
    Backpressure,
    BuildContext,
    Codec,
    ConfigValueError,
    Listen,
    Receipt,
    RecordBatch,
    Runtime,
    Source,
    client_authentication,
)
from sidecar.codecs import JsonlCodec, SchemaConfig, TsvCodec
from sidecar.serving import ServerHost, ssl_server_context

if TYPE_CHECKING:
    from adapters.http.server import HttpServer

__all__ = ["HttpSource", "decompress", "split_records"]

log = structlog.get_logger("querylog.http")

ORIGIN = "http"
#: Worker threads of the host: bodies are decoded in parallel, the chain takes one batch at a time.
WORKERS = 4


class HttpSource(Source[HttpSourceConfig]):
    """An HTTP server taking JSON records by POST; each body is one ``RecordBatch``, answered after ``receive``."""

    NAME = "http"
    Config = HttpSourceConfig
    SUMMARY = (
        "NDJSON, JSON arrays, msgpack or text lines over HTTP POST (Vector http sink, Fluent Bit http output, "
        "syslog-ng http()): 200 once durable "
        "(also when some records were bad: counted, dead-lettered), 400 only when none was taken, 413 too large, "
        "503 retry later"
    )

    def __init__(self, config: HttpSourceConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self._token = config.bearer_token(ctx)
        self._tls = ssl_server_context(config, ctx)
        codec = ctx.codec_for("jsonl")  # the runtime's own JSON-lines codec: sinks writing JSON lines keep lines
        own = ctx.codec_for(ctx.schema.format) if ctx.schema is not None else None
        if getattr(own, "json_records", False):  # the schema's format reads JSON objects itself (format: ubi)
            codec = own
        #: the codec of JSON and msgpack bodies' objects
        self.codec = codec if codec is not None else JsonlCodec(ctx.schema or SchemaConfig())
        #: Counters by reason (requests refused, records dead-lettered...): no values.
        self.counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()
        self.stopping = False
        self._runtime: Runtime | None = None
        self._host: ServerHost | None = None
        self._server: HttpServer | None = None

    # ---- lifecycle --------------------------------------------------------------------------------
    def start(self, runtime: Runtime) -> None:
        """Bind and serve on the shared host; returns once listening."""
        self._runtime = runtime
        self.stopping = False
        from adapters.http.server import HttpServer  # aiohttp is imported only by a config that serves HTTP

        self._server = HttpServer(self, self._tls)
        self._host = ServerHost("http", workers=WORKERS, lock=runtime.lock)
        self._host.start(self._server)
        log.info("http_source_started", port=self.port, tls=self._tls is not None, auth=self._token is not None)

    def authentication(self) -> list[str]:
        """How a client proves itself: ``mtls`` (client certificates), ``token`` (bearer token), else ``none``."""
        return client_authentication(mtls=self.config.tls_client_ca_file is not None, token=self._token is not None)

    def listening(self) -> list[Listen]:
        return list(self._host.listening) if self._host is not None else []

    @property
    def port(self) -> int:
        """The bound port (useful with ``listen: host:0``)."""
        assert self._host is not None and self._host.listening, "start() first"
        return self._host.listening[0].port

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting; requests in progress finish within ``grace`` seconds; then every connection closes."""
        host = self._host
        if host is None:
            return
        self.stopping = True
        host.stop(self.config.shutdown_grace_seconds if grace is None else grace)
        log.info("http_source_stopped", **{k: v for k, v in sorted(self.stats().items()) if isinstance(v, int)})
        self._host = None

    # ---- what the server asks ---------------------------------------------------------------------
    def count(self, reason: str, n: int = 1) -> int:
        with self._counts_lock:
            self.counts[reason] += n
            total = self.counts[reason]
        if reason in _LOGGED and total & (total - 1) == 0:  # the 1st, 2nd, 4th... of a reason: a bounded log
            log.warning("http_request_refused", reason=reason, count=total)
        return total

    def check_token(self, header: str | None) -> str | None:
        """None when no token is configured or the header carries it; else ``missing_token`` / ``wrong_token``."""
        if self._token is None:
            return None
        if header is None:
            return "missing_token"
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            return "missing_token"
        if not hmac.compare_digest(value.strip().encode("utf-8", "surrogateescape"), self._token):
            return "wrong_token"
        return None

    def backpressure(self) -> str | None:
        """The name of a sink outbox that is full (the sinks refuse events now), else None."""
        return self._runtime.backpressure() if self._runtime is not None else None

    def take(self, body: bytes, kind: str, encoding: str) -> Answer:
        """One request body (as sent) into the runtime: decompressed, cut into records, received; the answer."""
        runtime = self._runtime
        assert runtime is not None, "start() first"
        retry = self.config.retry_after_seconds
        try:
            body = decompress(body, encoding, self.config.max_body_bytes)
        except BodyError as exc:
            self.count(exc.reason)
            return Answer(exc.status, {"error": exc.reason}, close=exc.status == 413)
        if runtime.backpressure() is not None:  # before the chain runs: a buffering filter releases nothing
            self.count("backpressure")
            return Answer(503, {"error": "backpressure"}, retry)
        max_record = self.ctx.max_record_bytes
        lines, positions, bad = (
            msgpack_records(body, max_record) if kind == "msgpack" else split_records(body, kind == "json", max_record)
        )
        codec = self.codec
        if kind == "text" and lines:
            try:
                codec, lines, positions = self._text_lines(lines, positions)
            except ConfigValueError:  # TSV lines, a schema whose roles are no columns of schema.columns
                bad += [(pos, "tsv_columns_lack_roles", line) for pos, line in zip(positions, lines, strict=True)]
                lines, positions = [], []
        receipt = Receipt()
        if lines:
            try:
                receipt = runtime.receive(RecordBatch(lines, codec, ORIGIN, positions))
            except Backpressure:  # an outbox filled up meanwhile: nothing ran, nothing acknowledged
                self.count("backpressure")
                return Answer(503, {"error": "backpressure"}, retry)
            except Exception as exc:  # a sink or the state refused (a full disk...): not acknowledged
                self.count("receive_failed")
                log.error("http_receive_failed", error=type(exc).__name__, lines=len(lines))
                return Answer(503, {"error": "unavailable"}, retry)
        return self._answer(runtime, receipt, bad)

    def _text_lines(self, lines: list[str], positions: list[int]) -> tuple[Codec, list[str], list[int]]:
        """The codec of a ``text/plain`` body's lines (:func:`~adapters.http.body.text_format`) and its records:
        for TSV (the columns of ``schema.columns``) a line that is exactly their header is skipped, counted as
        ``header_lines``."""
        fmt = text_format((self.ctx.schema or SchemaConfig()).format, lines)
        codec = self.codec if fmt == "jsonl" else self.ctx.codec_for(fmt)
        if codec is None:  # no runtime codecs (a bare BuildContext): the schema's own
            codec = TsvCodec(self.ctx.schema or SchemaConfig())
        if isinstance(codec, TsvCodec):
            header = "\t".join(codec.columns)
            keep = [i for i, line in enumerate(lines) if line.rstrip("\r") != header]
            if len(keep) < len(lines):
                self.count("header_lines", len(lines) - len(keep))
                lines, positions = [lines[i] for i in keep], [positions[i] for i in keep]
        return codec, lines, positions

    def _answer(self, runtime: Runtime, receipt: Receipt, bad: list[tuple[int, str, bytes | str | None]]) -> Answer:
        """Dead-letter the records that never reached the runtime; the counts, by reason."""
        reasons = Counter(receipt.reasons)
        if bad:
            dead = runtime.dead_letters
            for pos, reason, record in bad:
                dead.add(reason, ORIGIN, pos, record)
                reasons[reason] += 1
            dead.flush()
        dead_lettered = len(bad) + receipt.dead_lettered
        payload: dict[str, Any] = {
            "accepted": receipt.accepted,
            "dead_lettered": dead_lettered,
            "delivered": len(receipt.delivered),
            "held": receipt.held,
            "dropped": receipt.dropped,
        }
        if reasons:
            payload["reasons"] = dict(sorted(reasons.items()))
        with self._counts_lock:
            self.counts["bodies"] += 1
            self.counts["events_accepted"] += receipt.accepted
            self.counts["lines_dead_lettered"] += dead_lettered
        if dead_lettered and not receipt.accepted:
            self.count("no_line_taken")
            return Answer(400, payload)
        return Answer(200, payload)

    def stats(self) -> dict[str, Any]:
        """Counters (no values): bodies, events accepted, records dead-lettered, refusals by reason, connections."""
        with self._counts_lock:
            out: dict[str, Any] = dict(self.counts)
        if self._server is not None and self._host is not None:
            out["open_connections"] = self._server.open_connections
            out["requests_in_flight"] = self._host.inflight
        return out


#: Refusal reasons worth a (bounded) warning in the log.
_LOGGED = frozenset(
    {
        "missing_token",
        "wrong_token",
        "body_too_large",
        "too_many_connections",
        "idle_connection_closed",
        "body_timeout",
        "backpressure",
        "receive_failed",
        "no_line_taken",
        "invalid_gzip",
        "invalid_deflate",
        "unsupported_media_type",
        "unsupported_encoding",
        "bad_request",
    }
)
