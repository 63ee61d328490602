"""The HTTP side of the ``http`` source: aiohttp's low-level server on the shared host's event loop.

aiohttp parses HTTP in C (keep-alive, chunked bodies, header limits); a connection is a protocol object on the
loop, so an idle keep-alive connection costs no thread and never keeps another client waiting. Added here:

* **Connections:** at most ``max_connections``; one more closes the connection idle the longest (no request in
  progress) to make room, so idle peers cannot lock anyone out; only when every connection is busy is it
  answered 503 and closed (on a TLS port after the handshake, never in plaintext: :mod:`sidecar.boundedhttp`,
  shared with the otlp source). A TLS handshake not completed within
  ``handshake_timeout_seconds`` is closed. A connection that completes no request's headers within
  ``idle_timeout_seconds`` (of its start or of its last answer) is closed; a body gets ``idle_timeout_seconds``
  between two pieces and ``body_timeout_seconds`` in all, else 408 and close (a 1-byte-per-second sender).
* **Requests:** ``GET /health``; ``POST`` on ``path`` (``Expect: 100-continue`` answered once the token and the
  length passed); refusals and the parser's own errors as JSON, counted by reason, never echoing the input and
  never logged. A body goes to :meth:`Endpoint.take` through the host's workers (decode, ``runtime.receive``);
  the answer is written when it returns.
* **Stop:** the listeners close, idle connections end at once, requests in progress get ``grace`` seconds to
  be answered, then every connection is closed.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any, Protocol

import structlog
from aiohttp import web

from adapters.http.body import Answer, BodyError, body_format
from adapters.http.config import HttpSourceConfig
from sidecar.api import Listen
from sidecar.boundedhttp import BoundedConnection, BoundedServer, refusal
from sidecar.serving import ServerHost

log = structlog.get_logger("querylog.http")

TOO_MANY_CONNECTIONS = refusal(b"application/json", b'{"error": "too_many_connections"}\n', retry_after=1)
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
SERVER_NAME = "querylog-sidecar"
BACKLOG = 1024


class Endpoint(Protocol):
    """What the server asks of the source."""

    config: HttpSourceConfig
    stopping: bool

    def count(self, reason: str, n: int = 1) -> int: ...

    def check_token(self, header: str | None) -> str | None: ...

    def backpressure(self) -> str | None: ...

    def take(self, body: bytes, kind: str, encoding: str) -> Answer:
        """A whole body into the runtime (blocking; on a worker): the answer."""
        ...


def reply(answer: Answer) -> web.Response:
    """The response of ``answer`` (``", "`` separators and a final newline; nothing of the request echoed)."""
    body = (json.dumps(answer.payload, separators=(", ", ": ")) + "\n").encode("utf-8")
    resp = web.Response(status=answer.status, body=body, content_type="application/json")
    resp.headers["Server"] = SERVER_NAME
    if answer.retry_after:
        resp.headers["Retry-After"] = str(answer.retry_after)
    resp.headers.update(answer.headers)
    if answer.status == 401:
        resp.headers["WWW-Authenticate"] = 'Bearer realm="querylog"'
    if answer.close:
        resp.force_close()
    return resp


class _Connection(BoundedConnection):
    """One connection: refused at once over ``max_connections``; the parser's errors answered as JSON, unlogged."""

    _manager: _WebServer | None

    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        """A request line or headers the parser refused, or a bug: a JSON answer, counted, never logged (the
        library's own log line would quote the request)."""
        reason = "bad_request" if status == 400 else f"http_{status}"
        if status >= 500 and exc is not None:  # a bug: its type only (its message may quote a value)
            log.error("http_request_failed", error=type(exc).__name__)
        if self._manager is not None:
            self._manager.endpoint.count(reason)
        if request.writer.output_size > 0:  # an answer is on its way already: only closing is left
            raise ConnectionError("answer already started")
        return reply(Answer(status, {"error": reason}, close=True))


class _WebServer(BoundedServer):
    """aiohttp's low-level server making :class:`_Connection` protocols for an :class:`Endpoint`."""

    connection_class = _Connection

    def __init__(self, endpoint: Endpoint, handler: Any) -> None:
        idle = endpoint.config.idle_timeout_seconds
        super().__init__(
            handler,
            max_connections=endpoint.config.max_connections,
            refusal=TOO_MANY_CONNECTIONS,
            count=endpoint.count,
            refused_reason="too_many_connections",
            idle_closed_reason="idle_connection_closed",
            keepalive_timeout=idle,  # also closes a connection that never completes its request's headers
            access_log=None,  # a request line may carry anything: counts only, in the source
            auto_decompress=False,  # decompressed by the source, bounded by max_body_bytes (a gzip bomb is a 413)
            lingering_time=min(idle, 10.0),  # the unread body of a refused request, drained before closing
        )
        self.endpoint = endpoint


class HttpServer:
    """The host's protocol (:class:`sidecar.serving.ServerProtocol`) for an :class:`Endpoint`."""

    def __init__(self, endpoint: Endpoint, tls: ssl.SSLContext | None) -> None:
        self.endpoint = endpoint
        self.tls = tls
        self.host: ServerHost | None = None
        self._web: _WebServer | None = None
        self._listeners: list[asyncio.Server] = []

    @property
    def open_connections(self) -> int:
        return self._web.open if self._web is not None else 0

    async def start(self, host: ServerHost) -> list[Listen]:
        self.host = host
        self._web = _WebServer(self.endpoint, self._handle)
        listen = Listen.parse(self.endpoint.config.listen)
        loop = asyncio.get_running_loop()
        timeout = self.endpoint.config.handshake_timeout_seconds if self.tls is not None else None
        server = await loop.create_server(
            self._web, listen.host, listen.port, ssl=self.tls, ssl_handshake_timeout=timeout, backlog=BACKLOG
        )
        self._listeners = [server]
        return [Listen(str(sock.getsockname()[0]), int(sock.getsockname()[1])) for sock in server.sockets]

    async def stop(self, host: ServerHost, grace: float) -> None:
        self.endpoint.stopping = True
        for server in self._listeners:
            server.close()
        for _ in range(3):  # connections accepted just before the close get their handler (then shut down below)
            await asyncio.sleep(0)
        if self._web is not None:
            self._web.pre_shutdown()  # idle keep-alive connections end now, busy ones once answered
            await self._web.shutdown(grace)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        endpoint = self.endpoint
        path = request.raw_path.split("?", 1)[0]
        if request.method == "GET" and path == "/health":
            if endpoint.stopping:
                return reply(Answer(503, {"status": "stopping"}, close=True))
            return reply(Answer(200, {"status": "ok", "backpressure": endpoint.backpressure()}))
        if path != endpoint.config.path and request.method in ("GET", "POST"):
            return self._refuse(404, "not_found")
        if request.method != "POST":
            return self._refuse(405, "method_not_allowed")
        if endpoint.stopping:
            return self._refuse(503, "stopping", retry_after=endpoint.config.retry_after_seconds)
        assert self.host is not None
        with self.host.track():
            try:
                body, kind, encoding = await self._read(request)
            except BodyError as exc:
                self.endpoint.count(exc.reason)
                return reply(exc.answer(exc.status != 415 or endpoint.stopping))
            answer = await self.host.work(endpoint.take, len(body), body, kind, encoding)
        answer.close = answer.close or endpoint.stopping
        return reply(answer)

    def _refuse(self, status: int, reason: str, *, close: bool = True, retry_after: int = 0) -> web.Response:
        self.endpoint.count(reason)
        return reply(Answer(status, {"error": reason}, retry_after, close or self.endpoint.stopping))

    def _check(self, request: web.BaseRequest, chunked: bool) -> BodyError | None:
        """Why a POST is refused before its body is read (token, length), or None."""
        reason = self.endpoint.check_token(request.headers.get("Authorization"))
        if reason is not None:
            return BodyError(401, reason)
        length = request.headers.get("Content-Length")
        if length is None and not chunked:
            return BodyError(411, "length_required")
        if length is not None and length.strip().isdigit() and int(length) > self.endpoint.config.max_body_bytes:
            return BodyError(413, "body_too_large")
        return None

    async def _read(self, request: web.BaseRequest) -> tuple[bytes, str, str]:
        """The body as sent (``max_body_bytes`` at most) and its format, once the token and length passed."""
        config = self.endpoint.config
        chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
        refused = self._check(request, chunked)
        expect = request.headers.get("Expect", "").lower() == "100-continue"
        if refused is not None:
            if expect:  # the client waits for a 100 and sends no body: close right after the answer
                request.content.feed_eof()
            raise refused
        if expect:
            await request.writer.write(_CONTINUE)
        parts: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(config.body_timeout_seconds):  # however the body trickles in
                while True:
                    async with asyncio.timeout(config.idle_timeout_seconds):
                        chunk = await request.content.readany()
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > config.max_body_bytes:  # chunked or not: never more than the bound in memory
                        raise BodyError(413, "body_too_large")
                    parts.append(chunk)
        except TimeoutError:
            request.content.feed_eof()  # no lingering over the rest of a trickling body: answer and close
            raise BodyError(408, "body_timeout") from None
        except BodyError:
            raise
        except Exception:  # chunk framing the parser refused, or the peer went away mid-body
            raise BodyError(400, "invalid_chunked_body" if chunked else "truncated_body") from None
        kind, encoding = body_format(request.headers.get("Content-Type"), request.headers.get("Content-Encoding"))
        return b"".join(parts), kind, encoding
