"""Bearer-token authentication of the gRPC service, client side (what ``querylog send`` and the tests use).

With ``server.auth_token_file`` or ``server.auth_token_env`` set, every RPC but the standard health service
(``grpc.health.v1.Health``: an orchestrator's probe carries no secret) must carry the metadata
``authorization: Bearer <token>``; ``GetProfile`` takes the profile reader's token instead when one is set. The
server side is :mod:`sidecar.grpcauth` (shared with the ``vector`` source): a missing or wrong token ends the
RPC with UNAUTHENTICATED before any handler runs, counted by reason (``missing_token``, ``wrong_token``) in
``Stats`` and the metrics. Mutual TLS (client certificates) is the transport's business: see
``server.tls_client_ca_file``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import grpc


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
