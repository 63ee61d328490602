"""OTLP/HTTP connections, bounded: at most ``max_connections`` open on ``http_listen``.

aiohttp's low-level server keeps a connection as a protocol object on the loop (an idle keep-alive connection
costs no thread, but a file descriptor and memory). One connection more than the limit closes the connection
idle the longest (no request in progress or queued) to make room, so exporters that keep idle connections open
never lock a new one out; only when every connection is busy is the newcomer answered 503 with ``Retry-After``
(which the OTLP exporters retry) and closed. On a TLS port the refusal is sent once the handshake completed
(``connection_made`` runs after it), never in plain text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web

from sidecar.serving import close_idle_connection

__all__ = ["BoundedServer"]


def _refusal(retry_after: int) -> bytes:
    body = b"too_many_connections"
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: %d\r\nRetry-After: %d\r\nConnection: close\r\n\r\n%s" % (len(body), retry_after, body)
    )


class _Connection(web.RequestHandler):
    """One connection: refused at once when the server is full of busy connections."""

    _manager: BoundedServer | None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        manager = self._manager
        assert manager is not None
        if manager.open >= manager.max_connections and not manager.evict_idle():
            manager.count("connections_refused_too_many")
            self._manager = None  # connection_lost has nothing to undo
            writable: Any = transport
            writable.write(manager.refusal)
            writable.close()
            return
        super().connection_made(transport)


class BoundedServer(web.Server):
    """aiohttp's low-level server with at most ``max_connections`` connections (see the module)."""

    def __init__(
        self,
        handler: Any,
        *,
        max_connections: int,
        retry_after_seconds: int,
        count: Callable[[str], object],
        **kwargs: Any,
    ) -> None:
        """``count(reason)`` counts a refused connection or an idle one closed to make room."""
        super().__init__(handler, **kwargs)
        self.max_connections = max_connections
        self.refusal = _refusal(retry_after_seconds)
        self.count = count

    @property
    def open(self) -> int:
        """Connections open now (a length: safe to read from another thread)."""
        return len(self._connections)

    def evict_idle(self) -> bool:
        """Close the connection idle the longest (no request in progress or queued): True, or False when every
        connection is busy. Only called when full."""
        if not close_idle_connection(self._connections):
            return False
        self.count("connections_idle_closed")
        return True

    def __call__(self) -> web.RequestHandler:
        return _Connection(self, loop=self._loop, **self._kwargs)
