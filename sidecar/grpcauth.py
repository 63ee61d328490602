"""Bearer-token authentication for the gRPC servers on the host (the ``grpc`` and ``vector`` sources).

With a token configured (:class:`~sidecar.api.BearerToken`), every RPC but the exempt ones (a health probe
carries no secret) must carry the metadata ``authorization: Bearer <token>``. A missing or wrong token ends the
RPC with UNAUTHENTICATED before any handler runs; it is counted by reason (``missing_token``, ``wrong_token``)
through the server's own callback, and logged for the 1st, 2nd, 4th, 8th... refusal of a reason. A method may
accept another token besides (``also``: the profile reader's token for ``GetProfile``). Tokens are compared in
constant time and never logged or put into a message.

:func:`peer_subjects` gives the names a client certificate proves under mutual TLS, for a handler that lets only
one identity in.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import grpc
import grpc.aio
import structlog

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


def carries(metadata: Any, token: bytes) -> bool:
    """Whether the call metadata carries ``token`` as its bearer token (constant-time comparison)."""
    sent = bearer(metadata)
    return sent is not None and hmac.compare_digest(sent.encode("utf-8", "surrogateescape"), token.strip())


def peer_subjects(context: grpc.aio.ServicerContext[Any, Any]) -> set[str]:
    """The names the client's certificate proves (mutual TLS): its subject (``CN=reader,O=Example``) and its
    common name; empty without a client certificate."""
    auth = context.auth_context() or {}

    def text(value: Any) -> str:
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    names = {text(v) for v in auth.get("x509_subject", ())}
    for cn in map(text, auth.get("x509_common_name", ())):
        names |= {cn, "CN=" + cn}
    return names


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
    """Refuses every RPC but the ``exempt`` ones (method-name prefixes) without the right bearer token;
    ``on_refused(reason)`` counts a refusal and returns the count so far. ``also`` maps a full method name
    (``/pkg.Service/Method``) to another token that method accepts instead."""

    def __init__(
        self,
        token: bytes,
        on_refused: Callable[[str], int],
        *,
        exempt: tuple[str, ...] = (),
        also: Mapping[str, bytes] | None = None,
        logger: str = "querylog.grpc",
    ) -> None:
        self._token = token.strip()
        self._on_refused = on_refused
        self._exempt = exempt
        self._also = {k: v.strip() for k, v in (also or {}).items()}
        self._log = structlog.get_logger(logger)

    def check(self, metadata: Any, method: str = "") -> str | None:
        """None when the metadata carries the token (or the method's other one), else the reason
        (``missing_token``, ``wrong_token``)."""
        token = bearer(metadata)
        if token is None:
            return "missing_token"
        sent = token.encode("utf-8", "surrogateescape")
        if hmac.compare_digest(sent, self._token):
            return None
        other = self._also.get(method)
        if other is not None and hmac.compare_digest(sent, other):
            return None
        return "wrong_token"

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method = handler_call_details.method
        if method.startswith(self._exempt):
            return await continuation(handler_call_details)
        reason = self.check(handler_call_details.invocation_metadata, method)
        if reason is None:
            return await continuation(handler_call_details)
        count = self._on_refused(reason)
        if count & (count - 1) == 0:  # the 1st, 2nd, 4th, 8th... refusal of a reason: a bounded log
            self._log.warning("rpc_unauthenticated", method=method.rpartition("/")[2], reason=reason, count=count)
        return _refusal(await continuation(handler_call_details))
