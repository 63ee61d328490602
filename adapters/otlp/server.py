"""The ``otlp`` source's servers on the shared host (:mod:`sidecar.serving`): OTLP/gRPC and OTLP/HTTP.

* **gRPC** ``opentelemetry.proto.collector.logs.v1.LogsService/Export`` on ``listen``: the request's bytes go to
  :meth:`~adapters.otlp.export.Exporter.export` in the host's work; OK with an ``ExportLogsServiceResponse``
  (``partial_success`` when records were rejected) once it returned. ``RESOURCE_EXHAUSTED`` when an outbox or
  the disk is full (with a ``google.rpc.RetryInfo`` of ``retry_after_seconds``, OTLP's throttling, in both
  trailers of :mod:`adapters.otlp.throttle`), ``UNAVAILABLE`` for another failure (the exporters retry both),
  ``INVALID_ARGUMENT`` for garbage or too many records (not retried). gRPC itself refuses a request over
  ``max_message_bytes``.
* **HTTP** ``POST /v1/logs`` on ``http_listen`` (aiohttp's low-level server on the same loop):
  ``application/x-protobuf`` or ``application/json`` (OTLP/JSON), ``Content-Encoding: gzip`` too; the answer
  in the request's content type. 200 once durable; 400 garbage or too many records; 401 without the token;
  404/405 another path/method; 413 over ``max_message_bytes`` (as sent or decompressed); 415 another type or
  encoding; 503 with ``Retry-After`` when the sinks cannot take it now (the exporters retry 429/502/503/504).
  At most ``max_connections`` connections (:mod:`sidecar.boundedhttp`).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio
import structlog
from aiohttp import web
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from adapters.otlp.export import Exporter, InvalidRequest, Outcome, TooLarge, TooMany, decompress, json_to_protobuf
from adapters.otlp.throttle import throttle_trailers
from sidecar.api import Backpressure, Listen
from sidecar.boundedhttp import BoundedServer, refusal
from sidecar.failures import describe_failure
from sidecar.serving import ServerHost

if TYPE_CHECKING:
    from adapters.otlp.config import OtlpSourceConfig

log = structlog.get_logger("querylog.otlp")

SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
HTTP_PATH = "/v1/logs"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
#: how long a body may pause between two pieces, and take in all, else 408
IDLE_SECONDS = 30.0
BODY_SECONDS = 120.0


def failure_kind(exc: BaseException) -> str:
    """``busy`` (an outbox or the disk is full: retry later), ``unavailable`` or ``internal``."""
    return "busy" if isinstance(exc, Backpressure) else describe_failure(exc).kind


def response(outcome: Outcome) -> ExportLogsServiceResponse:
    """The ``ExportLogsServiceResponse`` of an export: ``partial_success`` only when records were rejected."""
    answer = ExportLogsServiceResponse()
    if outcome.rejected:
        answer.partial_success.rejected_log_records = outcome.rejected
        answer.partial_success.error_message = outcome.message
    return answer


class OtlpServers:
    """OTLP/gRPC and (optionally) OTLP/HTTP as one :class:`~sidecar.serving.ServerProtocol`."""

    def __init__(
        self,
        exporter: Exporter,
        config: OtlpSourceConfig,
        *,
        listen: Listen,
        http_listen: Listen | None,
        creds: grpc.ServerCredentials | None,
        ssl_context: ssl.SSLContext | None,
        interceptors: list[grpc.aio.ServerInterceptor],
        check_token: Any,
    ) -> None:
        self.exporter = exporter
        self.config = config
        self.listen = listen
        self.http_listen = http_listen
        self.creds = creds
        self.ssl_context = ssl_context
        self.interceptors = interceptors
        #: ``check_token(header) -> reason | None`` for HTTP requests
        self.check_token = check_token
        self.host: ServerHost | None = None
        self.stopping = False
        self._grpc: grpc.aio.Server | None = None
        self._web: BoundedServer | None = None
        self._listener: asyncio.Server | None = None
        self._last: str | None = None

    async def start(self, host: ServerHost) -> list[Listen]:
        self.host = host
        size = self.config.max_message_bytes
        server = grpc.aio.server(
            interceptors=self.interceptors,
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", 4 * 1024 * 1024),
                ("grpc.so_reuseport", 0),
            ],
        )
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "Export": grpc.unary_unary_rpc_method_handler(self.grpc_export)  # bytes in, bytes out
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        address = str(self.listen)
        try:
            port = server.add_secure_port(address, self.creds) if self.creds else server.add_insecure_port(address)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {address}") from exc
        if not port:
            raise OSError(f"cannot listen on {address}")
        await server.start()
        self._grpc = server
        bound = [Listen(self.listen.host, port)]
        if self.http_listen is not None:
            assert self.host is not None
            self._web = BoundedServer(
                self.http_export,
                max_connections=self.config.max_connections,
                refusal=refusal(b"text/plain; charset=utf-8", b"too_many_connections", self.config.retry_after_seconds),
                count=self.host.count,
                refused_reason="connections_refused_too_many",
                idle_closed_reason="connections_idle_closed",
                access_log=None,
                auto_decompress=False,
            )
            listener = await asyncio.get_running_loop().create_server(
                self._web, self.http_listen.host, self.http_listen.port, ssl=self.ssl_context
            )
            self._listener = listener
            sock = listener.sockets[0].getsockname()
            bound.append(Listen(self.http_listen.host, int(sock[1])))
        return bound

    @property
    def open_connections(self) -> int:
        """OTLP/HTTP connections open now."""
        return self._web.open if self._web is not None else 0

    async def stop(self, host: ServerHost, grace: float) -> None:
        self.stopping = True
        if self._listener is not None:
            self._listener.close()
        if self._web is not None:
            self._web.pre_shutdown()
        if self._grpc is not None:
            await self._grpc.stop(grace)
        if self._web is not None:
            await self._web.shutdown(grace)

    def _count(self, outcome: str, n: int = 1) -> None:
        assert self.host is not None
        self.host.count("requests_" + outcome, n)
        if outcome.startswith("refused_") and self._last != outcome:
            log.warning("otlp_export_refused", reason=outcome[len("refused_") :])
        self._last = outcome

    def _done(self, outcome: Outcome) -> None:
        self._count("ok")
        assert self.host is not None
        self.host.count("records_accepted", outcome.accepted)
        self.host.count("records_rejected", outcome.rejected)

    # ---- gRPC -----------------------------------------------------------------------------------
    async def grpc_export(self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        """One ``Export``: answered once durable, an error status the exporters retry when not."""
        assert self.host is not None
        try:
            outcome = await self.host.work(self.exporter.export, len(request), request)
        except InvalidRequest:
            self._count("refused_invalid_request")
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not an ExportLogsServiceRequest (dead-lettered)")
        except TooMany:
            self._count("refused_too_many_records")
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"more than {self.config.max_records_per_request} log records in one request: "
                "lower the exporter's batch size",
            )
        except Exception as exc:
            kind = failure_kind(exc)
            code = grpc.StatusCode.RESOURCE_EXHAUSTED if kind == "busy" else grpc.StatusCode.UNAVAILABLE
            self._count(f"refused_{kind}")
            message = str(exc) if kind == "busy" else describe_failure(exc).message
            trailers: tuple[tuple[str, bytes], ...] = ()
            if kind == "busy":  # OTLP's throttling: a RetryInfo says when to come back
                trailers = throttle_trailers(code.value[0], message, self.config.retry_after_seconds)
            await context.abort(code, message, trailing_metadata=trailers)
        self._done(outcome)
        return bytes(response(outcome).SerializeToString())

    # ---- HTTP -----------------------------------------------------------------------------------
    async def http_export(self, request: web.BaseRequest) -> web.StreamResponse:
        """``POST /v1/logs``: the answer in the request's content type."""
        assert self.host is not None
        kind = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        as_json = kind == JSON
        path = request.raw_path.split("?", 1)[0]
        if path != HTTP_PATH:
            return self._refuse(404, "not_found", as_json)
        if request.method != "POST":
            return self._refuse(405, "method_not_allowed", as_json)
        if self.stopping:
            return self._refuse(503, "stopping", as_json, retry=True)
        reason = self.check_token(request.headers.get("Authorization"))
        if reason is not None:
            return self._refuse(401, reason, as_json)
        if kind not in (PROTOBUF, JSON):
            return self._refuse(415, "unsupported_media_type", as_json)
        limit = self.config.max_message_bytes
        length = request.headers.get("Content-Length", "")
        if length.strip().isdigit() and int(length) > limit:
            return self._refuse(413, "body_too_large", as_json)
        with self.host.track():
            try:
                body = await self._read(request, limit)
            except TooLarge:
                return self._refuse(413, "body_too_large", as_json)
            except TimeoutError:
                return self._refuse(408, "body_timeout", as_json)
            try:
                data = decompress(body, request.headers.get("Content-Encoding", ""), limit)
            except TooLarge:
                return self._refuse(413, "body_too_large", as_json)
            except InvalidRequest:
                return self._refuse(400, "invalid_compression", as_json)
            except ValueError:
                return self._refuse(415, "unsupported_encoding", as_json)
            try:
                if as_json:
                    data = await self.host.work(json_to_protobuf, len(data), data)
                outcome = await self.host.work(self.exporter.export, len(data), data)
            except TooMany:
                return self._refuse(400, "too_many_records", as_json)
            except InvalidRequest:
                return self._refuse(400, "invalid_request", as_json)
            except Exception as exc:
                kind = failure_kind(exc)
                status = 500 if kind == "internal" else 503
                return self._refuse(status, kind, as_json, retry=status == 503)
        self._done(outcome)
        answer = response(outcome)
        if as_json:
            text = json.dumps(
                {"partialSuccess": {"rejectedLogRecords": str(outcome.rejected), "errorMessage": outcome.message}}
                if outcome.rejected
                else {}
            )
            return web.Response(status=200, text=text, content_type=JSON)
        return web.Response(status=200, body=answer.SerializeToString(), content_type=PROTOBUF)

    async def _read(self, request: web.BaseRequest, limit: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        async with asyncio.timeout(BODY_SECONDS):  # however slowly the body trickles in
            while True:
                async with asyncio.timeout(IDLE_SECONDS):
                    chunk = await request.content.readany()
                if not chunk:
                    return b"".join(parts)
                size += len(chunk)
                if size > limit:
                    raise TooLarge
                parts.append(chunk)

    def _refuse(self, status: int, reason: str, as_json: bool, *, retry: bool = False) -> web.Response:
        """A refusal: counted by reason, the reason as the message (nothing of the request echoed)."""
        self._count(f"refused_{reason}")
        headers = {"Retry-After": str(self.config.retry_after_seconds)} if retry else {}
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="querylog"'
        if as_json:
            return web.Response(status=status, text=json.dumps({"message": reason}), content_type=JSON, headers=headers)
        return web.Response(status=status, text=reason, headers=headers)
