"""Bearer-token authentication of the gRPC service, server side and client side.

With ``server.auth_token_file`` or ``server.auth_token_env`` set, every RPC but the standard health service
(``grpc.health.v1.Health``: an orchestrator's probe carries no secret) must carry the metadata
``authorization: Bearer <token>``. A missing or wrong token ends the RPC with UNAUTHENTICATED before any
handler runs; it is counted by reason (``missing_token``, ``wrong_token``) in ``Stats`` and the metrics. The
token is compared in constant time and never logged or put into a message. Mutual TLS (client certificates)
is the transport's business: see ``server.tls_client_ca_file``.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, NamedTuple

import grpc
import grpc.aio
import structlog

log = structlog.get_logger("querylog.grpc")

HEALTH_PREFIX = "/grpc.health.v1.Health/"
REFUSED = "missing or invalid bearer token"


def bearer(metadata: Any) -> str | None:
    """The token of an ``authorization: Bearer <token>`` entry of call metadata (None: there is none)."""
    for key, value in metadata or ():
        if key.lower() != "authorization":
            continue
        text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        scheme, _, token = text.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None


async def _refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, REFUSED)


def _refusal(handler: grpc.RpcMethodHandler[Any, Any] | None) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler of the same kind as ``handler`` (unary or streaming) that only says UNAUTHENTICATED."""
    streaming_in = handler is not None and handler.request_streaming
    streaming_out = handler is not None and handler.response_streaming
    if streaming_in and streaming_out:
        return grpc.stream_stream_rpc_method_handler(_refuse)
    if streaming_in:
        return grpc.stream_unary_rpc_method_handler(_refuse)
    if streaming_out:
        return grpc.unary_stream_rpc_method_handler(_refuse)
    return grpc.unary_unary_rpc_method_handler(_refuse)


class BearerTokenAuth(grpc.aio.ServerInterceptor):
    """Refuses every RPC but health without the right bearer token; ``on_refused(reason)`` counts it."""

    def __init__(self, token: bytes, on_refused: Callable[[str], int]) -> None:
        self._token = token.strip()
        self._on_refused = on_refused

    def check(self, metadata: Any) -> str | None:
        """None when the metadata carries the token, else the reason (``missing_token``, ``wrong_token``)."""
        token = bearer(metadata)
        if token is None:
            return "missing_token"
        if not hmac.compare_digest(token.encode("utf-8", "surrogateescape"), self._token):
            return "wrong_token"
        return None

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method = handler_call_details.method
        if method.startswith(HEALTH_PREFIX):
            return await continuation(handler_call_details)
        reason = self.check(handler_call_details.invocation_metadata)
        if reason is None:
            return await continuation(handler_call_details)
        count = self._on_refused(reason)
        if count & (count - 1) == 0:  # the 1st, 2nd, 4th, 8th... refusal of a reason: a bounded log
            log.warning("rpc_unauthenticated", method=method.rpartition("/")[2], reason=reason, count=count)
        return _refusal(await continuation(handler_call_details))


# ---- client side ------------------------------------------------------------------------------


class _Details(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class BearerToken(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Client interceptor adding ``authorization: Bearer <token>`` to every call (TLS or plaintext channel)."""

    def __init__(self, token: str) -> None:
        self._entry = ("authorization", f"Bearer {token.strip()}")

    def _details(self, details: Any) -> _Details:
        metadata = [*(details.metadata or ()), self._entry]
        return _Details(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: Iterator[Any]
    ) -> Any:
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: Iterator[Any]
    ) -> Any:
        return continuation(self._details(client_call_details), request_iterator)
