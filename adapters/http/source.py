"""The ``http`` source: newline-delimited JSON records over HTTP POST into the runtime.

**What a sender gets back** (Vector's ``http`` sink and Fluent Bit's ``http`` output retry on 5xx and drop
on 4xx, so the status says whether sending again can help):

* **200** once every record of the body is durable: ``runtime.receive`` returned (the events are delivered
  to the sinks, in a sink's durable outbox, held by a filter or dropped by rule) and the bad lines are in the
  dead-letter file. A body with some bad lines is answered 200 too, as long as at least one line was taken:
  sending it again could only duplicate the good lines, the bad ones would fail again. The JSON body counts
  them: ``{"accepted": 3, "dead_lettered": 1, "delivered": 3, "held": 0, "dropped": 0,
  "reasons": {"invalid_json": 1}}``. An empty body is a 200 with zero counts.
* **400** when no line of the body could be taken (every line bad: the same counts and reasons; the lines
  are dead-lettered), or the body cannot be read at all (``invalid_gzip``, ``invalid_chunked_body``).
* **401** without the right ``Authorization: Bearer <token>`` (when a token is configured), **404** for
  another path, **405** for another method, **411** without a length, **413** for a body over
  ``max_body_bytes`` (as sent or decompressed), **415** for another content type or encoding.
* **503** with ``Retry-After`` when the sinks cannot take the events now: a sink's outbox is full
  (backpressure, checked before the chain runs), or ``receive`` failed (a sink or the state database
  refused: a full disk...). Nothing of that body was acknowledged; the sender sends it again.

Accepted bodies: ``Content-Type`` ``application/x-ndjson`` (also ``application/json``,
``application/jsonlines``, ``text/plain`` or none): one JSON object per line, blank lines skipped; an
``application/json`` body that is one JSON array of objects (Fluent Bit's ``format json``, Vector without
newline framing) is taken as those objects. ``Content-Encoding`` ``gzip`` (several members too),
``deflate`` or ``identity``; ``Content-Length`` or chunked. A line longer than ``limits.max_record_bytes``
(``oversized_record``) or not UTF-8 (``invalid_utf8``) is dead-lettered here; the runtime's codec
dead-letters lines that are not a record (``invalid_json``, ``missing_query``...).

``GET /health`` answers 200 ``{"status": "ok", "backpressure": null}`` (the name of a full outbox instead
of null while the sinks refuse), without a token; 503 while stopping.

**Threads.** One thread per connection (the standard library's threading HTTP server), so idle keep-alive
connections never block others; ``max_connections`` bounds them and ``idle_timeout_seconds`` closes idle
ones. ``receive`` runs on the connection's thread (the runtime serializes batches). The server never logs a
request line, a header value or a record: counts by reason only.
"""

from __future__ import annotations

import contextlib
import hmac
import http.server
import json
import socket
import socketserver
import ssl
import threading
import zlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import structlog

from adapters.http.config import HttpSourceConfig
from sidecar.api import BuildContext, Receipt, RecordBatch, Runtime, Source
from sidecar.codecs import JsonlCodec, SchemaConfig
from sidecar.netsink import read_secret
from sidecar.outbox import backpressure

log = structlog.get_logger("querylog.http")

ORIGIN = "http"
_CONTENT_TYPES = frozenset(
    {"", "application/x-ndjson", "application/json", "application/jsonlines", "application/x-jsonlines", "text/plain"}
)
_ENCODINGS = frozenset({"", "identity", "gzip", "x-gzip", "deflate"})
_REFUSAL_BODY = b'{"error": "too_many_connections"}\n'
_TOO_MANY_CONNECTIONS = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s" % (len(_REFUSAL_BODY), _REFUSAL_BODY)
)


class BodyError(Exception):
    """A request body that cannot be read: the HTTP status and a reason slug."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """The body without its ``Content-Encoding`` (gzip members one after another, deflate), at most ``limit``
    bytes; :class:`BodyError` 413 when longer, 400 when it is not valid."""
    if encoding in ("", "identity"):
        return body
    out: list[bytes] = []
    size = 0
    data = body
    try:
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS)
            chunk = d.decompress(data, limit + 1 - size)
            size += len(chunk)
            out.append(chunk)
            if size > limit or d.unconsumed_tail:
                raise BodyError(413, "body_too_large")
            if not d.eof:
                raise BodyError(400, f"invalid_{encoding.removeprefix('x-')}")
            data = d.unused_data
            if encoding == "deflate":
                break
    except zlib.error:
        raise BodyError(400, f"invalid_{encoding.removeprefix('x-')}") from None
    return b"".join(out)


def split_records(
    body: bytes, json_array: bool, max_record_bytes: int
) -> tuple[list[str], list[int], list[tuple[int, str, bytes | str | None]]]:
    """The records of a body: (lines, their 1-based positions, bad ones as (position, reason, record)).

    Blank lines are skipped; a line over ``max_record_bytes`` (``oversized_record``, not kept) or not UTF-8
    (``invalid_utf8``) is bad. ``json_array``: the body may be one JSON array of objects instead.
    """
    bad: list[tuple[int, str, bytes | str | None]] = []
    if json_array and body.lstrip()[:1] == b"[":
        try:
            items = json.loads(body)
        except ValueError:
            items = None  # not one array after all: read it as lines (each then fails as JSON, counted)
        if isinstance(items, list):
            lines: list[str] = []
            positions: list[int] = []
            for i, item in enumerate(items, 1):
                line = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
                try:
                    size = len(line.encode("utf-8"))
                except UnicodeEncodeError:  # a "\ud800" without its pair: no UTF-8 output could carry it
                    bad.append((i, "lone_surrogate", None))
                    continue
                if size > max_record_bytes:
                    bad.append((i, "oversized_record", None))
                    continue
                lines.append(line)
                positions.append(i)
            return lines, positions, bad
    lines = []
    positions = []
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        for i, piece in enumerate(body.split(b"\n"), 1):
            if not piece.strip():
                continue
            if len(piece) > max_record_bytes:
                bad.append((i, "oversized_record", None))
                continue
            try:
                lines.append(piece.decode("utf-8"))
            except UnicodeDecodeError:
                bad.append((i, "invalid_utf8", piece))
                continue
            positions.append(i)
        return lines, positions, bad
    quick = max_record_bytes // 4  # a str of at most this many characters fits in max_record_bytes of UTF-8
    for i, line in enumerate(text.split("\n"), 1):
        if not line or (line.isspace()):
            continue
        if len(line) > quick and len(line.encode("utf-8")) > max_record_bytes:
            bad.append((i, "oversized_record", None))
            continue
        lines.append(line)
        positions.append(i)
    return lines, positions, bad


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """A thread per connection, at most ``max_connections`` of them; TLS handshakes on the connection's thread."""

    daemon_threads = True
    block_on_close = False  # stop() ends idle connections itself, after requests in progress finished
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], source: HttpSource, tls: ssl.SSLContext | None) -> None:
        self.source = source
        self.tls = tls
        self.max_connections = source.config.max_connections
        self.idle_timeout = source.config.idle_timeout_seconds
        self.conns: set[socket.socket] = set()
        self.conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.conns_lock:
            refuse = len(self.conns) >= self.max_connections
            if not refuse:
                self.conns.add(request)
        if refuse:
            self.source.count("too_many_connections")
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                request.sendall(_TOO_MANY_CONNECTIONS)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        conn = request
        try:
            if self.tls is not None:
                request.settimeout(self.idle_timeout)
                try:
                    conn = self.tls.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError):
                    self.source.count("tls_handshake_failed")
                    return
                with self.conns_lock:
                    self.conns.discard(request)
                    self.conns.add(conn)
            self.finish_request(conn, client_address)
        except Exception as exc:
            self.source.count(f"connection_error_{type(exc).__name__}")
        finally:
            with self.conns_lock:
                self.conns.discard(request)
                self.conns.discard(conn)
            self.shutdown_request(conn)
            if conn is not request:
                self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:  # the default prints a traceback
        self.source.count("connection_error")

    def close_connections(self) -> None:
        """Wake every connection thread (an idle keep-alive connection waits in recv) and let it end."""
        with self.conns_lock:
            conns = list(self.conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    server_version = "querylog-sidecar"
    sys_version = ""
    disable_nagle_algorithm = True  # the answer's headers and body are two writes
    server: _Server

    def setup(self) -> None:
        self.request.settimeout(self.server.idle_timeout)  # every read: idle keep-alive and slow requests alike
        super().setup()

    # the defaults write the request line (a path may carry anything) to stderr: counts only, in the source
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def log_error(self, format: str, *args: Any) -> None:
        pass

    @property
    def source(self) -> HttpSource:
        return self.server.source

    def _reply(self, status: int, payload: dict[str, Any], *, close: bool = False, retry_after: int = 0) -> None:
        body = (json.dumps(payload, separators=(", ", ": ")) + "\n").encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if retry_after:
            self.send_header("Retry-After", str(retry_after))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="querylog"')
        if close or self.source.stopping:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, status: int, reason: str, *, close: bool = False, retry_after: int = 0) -> None:
        self.source.count(reason)
        self._reply(status, {"error": reason}, close=close, retry_after=retry_after)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors the base class finds (a bad request line, headers too long...): JSON, no echo of the input."""
        self._refuse(code, "bad_request" if code == 400 else f"http_{code}", close=True)

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue``: refuse a body before it is sent when its length or the token is wrong."""
        refusal = self._precheck()
        if refusal is not None:
            status, reason = refusal
            self._refuse(status, reason, close=True)
            return False
        return super().handle_expect_100()

    def _precheck(self) -> tuple[int, str] | None:
        path = self.path.split("?", 1)[0]
        if path != self.source.config.path:
            return 404, "not_found"
        reason = self.source.check_token(self.headers.get("Authorization"))
        if reason is not None:
            return 401, reason
        length = self.headers.get("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > self.source.config.max_body_bytes:
            return 413, "body_too_large"
        return None

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == "/health":
            if self.source.stopping:
                self._reply(503, {"status": "stopping"}, close=True)
            else:
                self._reply(200, {"status": "ok", "backpressure": self.source.backpressure()})
            return
        if self.path.split("?", 1)[0] == self.source.config.path:
            self._refuse(405, "method_not_allowed", close=True)
        else:
            self._refuse(404, "not_found", close=True)

    def do_PUT(self) -> None:
        self._refuse(405, "method_not_allowed", close=True)

    do_DELETE = do_PATCH = do_PUT

    def do_POST(self) -> None:
        if self.source.stopping:
            self._refuse(503, "stopping", close=True, retry_after=self.source.config.retry_after_seconds)
            return
        with self.source.in_progress():
            self._post()

    def _post(self) -> None:
        refusal = self._precheck()
        if refusal is not None:
            status, reason = refusal
            self._refuse(status, reason, close=True)
            return
        try:
            body = self._read_body()
        except BodyError as exc:
            self._refuse(exc.status, exc.reason, close=True)
            return
        encoding = (self.headers.get("Content-Encoding") or "").strip().lower()
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if encoding not in _ENCODINGS:
            self._refuse(415, "unsupported_encoding")
            return
        if content_type not in _CONTENT_TYPES:
            self._refuse(415, "unsupported_media_type")
            return
        try:
            body = decompress(body, encoding, self.source.config.max_body_bytes)
        except BodyError as exc:
            self._refuse(exc.status, exc.reason, close=exc.status == 413)
            return
        status, payload, retry_after = self.source.take(body, json_array=content_type == "application/json")
        self._reply(status, payload, retry_after=retry_after)

    def _read_body(self) -> bytes:
        limit = self.source.config.max_body_bytes
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked(limit)
        length = self.headers.get("Content-Length")
        if length is None:
            raise BodyError(411, "length_required")
        if not length.strip().isdigit():
            raise BodyError(400, "invalid_content_length")
        n = int(length)
        if n > limit:
            raise BodyError(413, "body_too_large")
        body = self.rfile.read(n)
        if len(body) != n:
            raise BodyError(400, "truncated_body")
        return body

    def _read_chunked(self, limit: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(1026)
            try:
                n = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BodyError(400, "invalid_chunked_body") from None
            if n == 0:
                while self.rfile.readline(8194).strip():  # trailers
                    pass
                return b"".join(parts)
            size += n
            if size > limit:
                raise BodyError(413, "body_too_large")
            chunk = self.rfile.read(n)
            if len(chunk) != n or self.rfile.read(2) != b"\r\n":
                raise BodyError(400, "invalid_chunked_body")
            parts.append(chunk)


class HttpSource(Source[HttpSourceConfig]):
    """An HTTP server taking NDJSON POSTs; each body is one ``RecordBatch`` and is answered after ``receive``."""

    NAME = "http"
    Config = HttpSourceConfig
    SUMMARY = (
        "NDJSON over HTTP POST (Vector http sink, Fluent Bit http output): 200 once durable (also when some lines "
        "were bad: counted, dead-lettered), 400 only when no line was taken, 413 too large, 503 retry later"
    )

    def __init__(self, config: HttpSourceConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        token = read_secret(
            ctx, config.auth_token_env, config.auth_token_file, "auth_token_env", "auth_token_file", "bearer token"
        )
        self._token = token.strip() if token is not None else None
        schema = ctx.schema or SchemaConfig()
        codec = ctx.codec_for("jsonl")  # the runtime's own JSON-lines codec: sinks writing JSON lines keep lines
        self.codec = codec if codec is not None else JsonlCodec(schema)
        #: Counters by reason (requests refused, lines dead-lettered...): no values.
        self.counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()
        self.stopping = False
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._runtime: Runtime | None = None
        self._busy = 0
        self._idle = threading.Condition()

    # ---- lifecycle --------------------------------------------------------------------------------
    def start(self, runtime: Runtime) -> None:
        """Bind and serve on a thread of its own; returns at once."""
        self._runtime = runtime
        host, _, port = self.config.listen.rpartition(":")
        tls: ssl.SSLContext | None = None
        if self.config.tls_cert_file is not None and self.config.tls_key_file is not None:
            tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls.load_cert_chain(self.ctx.resolve(self.config.tls_cert_file), self.ctx.resolve(self.config.tls_key_file))
        self.stopping = False
        self._server = _Server((host.strip("[]"), int(port)), self, tls)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="querylog-http", daemon=True
        )
        self._thread.start()
        log.info("http_source_started", port=self.port, tls=tls is not None, auth=self._token is not None)

    @property
    def port(self) -> int:
        """The bound port (useful with ``listen: host:0``)."""
        assert self._server is not None, "start() first"
        return int(self._server.server_address[1])

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting; requests in progress finish within ``grace`` seconds; then every connection closes."""
        server = self._server
        if server is None:
            return
        self.stopping = True
        server.shutdown()
        server.server_close()
        wait = self.config.shutdown_grace_seconds if grace is None else grace
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, timeout=wait)
        server.close_connections()
        if self._thread is not None:
            self._thread.join(5)
        self._server = None
        log.info("http_source_stopped", **{k: v for k, v in sorted(self.stats().items()) if isinstance(v, int)})

    # ---- requests ---------------------------------------------------------------------------------
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
        return backpressure(self._runtime.sinks) if self._runtime is not None else None

    @contextlib.contextmanager
    def in_progress(self) -> Iterator[None]:
        """Marks a request in progress (read, taken, answered): ``stop`` waits for it before closing connections."""
        with self._idle:
            self._busy += 1
        try:
            yield
        finally:
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()

    def take(self, body: bytes, *, json_array: bool) -> tuple[int, dict[str, Any], int]:
        """One request body into the runtime: (status, JSON answer, Retry-After seconds or 0)."""
        runtime = self._runtime
        assert runtime is not None, "start() first"
        return self._take(runtime, body, json_array)

    def _take(self, runtime: Runtime, body: bytes, json_array: bool) -> tuple[int, dict[str, Any], int]:
        retry = self.config.retry_after_seconds
        full = backpressure(runtime.sinks)
        if full is not None:  # checked before the chain runs: a buffering filter releases nothing it cannot hand on
            self.count("backpressure")
            return 503, {"error": "backpressure"}, retry
        lines, positions, bad = split_records(body, json_array, self.ctx.max_record_bytes)
        receipt = Receipt()
        if lines:
            try:
                receipt = runtime.receive(RecordBatch(lines, self.codec, ORIGIN, positions))
            except Exception as exc:  # a sink or the state refused (outbox full, disk full...): not acknowledged
                self.count("receive_failed")
                log.error("http_receive_failed", error=type(exc).__name__, lines=len(lines))
                return 503, {"error": "unavailable"}, retry
        reasons: Counter[str] = Counter()
        if bad:  # the lines that never reached the runtime, once the others are taken
            dead = runtime.dead_letters
            for pos, reason, record in bad:
                dead.add(reason, ORIGIN, pos, record)
                reasons[reason] += 1
            dead.flush()
        if receipt.dead_lettered:  # which lines the codec refused, and why: decoded again, for bad bodies only
            codec_bad: list[tuple[int, str]] = []
            self.codec.decode_many(lines, "\n", codec_bad)
            reasons.update(reason for _, reason in codec_bad)
        dead_lettered = len(bad) + receipt.dead_lettered
        answer: dict[str, Any] = {
            "accepted": receipt.accepted,
            "dead_lettered": dead_lettered,
            "delivered": len(receipt.delivered),
            "held": receipt.held,
            "dropped": receipt.dropped,
        }
        if reasons:
            answer["reasons"] = dict(sorted(reasons.items()))
        with self._counts_lock:
            self.counts["bodies"] += 1
            self.counts["events_accepted"] += receipt.accepted
            self.counts["lines_dead_lettered"] += dead_lettered
        if dead_lettered and not receipt.accepted:
            self.count("no_line_taken")
            return 400, answer, 0
        return 200, answer, 0

    def stats(self) -> dict[str, Any]:
        """Counters (no values): bodies, events accepted, lines dead-lettered, refusals by reason, connections."""
        with self._counts_lock:
            out: dict[str, Any] = dict(self.counts)
        server = self._server
        if server is not None:
            with server.conns_lock:
                out["open_connections"] = len(server.conns)
        return out


#: Refusal reasons worth a (bounded) warning in the log.
_LOGGED = frozenset(
    {
        "missing_token",
        "wrong_token",
        "body_too_large",
        "too_many_connections",
        "backpressure",
        "receive_failed",
        "no_line_taken",
        "invalid_gzip",
        "invalid_deflate",
        "unsupported_media_type",
        "unsupported_encoding",
        "tls_handshake_failed",
    }
)
