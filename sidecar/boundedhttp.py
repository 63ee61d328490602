"""aiohttp's low-level server with at most ``max_connections`` connections, for the sources that serve HTTP on the
shared host's loop (``http``, and ``otlp``'s ``http_listen``).

A connection is a protocol object on the loop (an idle keep-alive connection costs no thread, but a file
descriptor and memory). One connection more than the limit closes the connection idle the longest (no request
in progress or queued, no bytes waiting unread) to make room, so clients that keep idle connections open never
lock a new one out, and a request that arrived in a burst of connections is not mistaken for idleness; only
when every connection is busy is the newcomer sent the source's 503 refusal and closed. On a TLS port the
refusal goes out once the handshake completed (``connection_made`` runs after it), never in plain text. Each
source counts both events under its own reason names. It reads aiohttp 3.14 internals (pinned in pyproject.toml).
"""

from __future__ import annotations

import asyncio
import fcntl
import struct
import termios
from collections.abc import Callable
from typing import Any

from aiohttp import web

__all__ = ["BoundedConnection", "BoundedServer", "close_idle_connection", "refusal", "unread_bytes"]


def refusal(content_type: bytes, body: bytes, retry_after: int) -> bytes:
    """The bytes of a 503 answer with ``Retry-After`` that closes the connection, written before any request."""
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: %s\r\nContent-Length: %d\r\nRetry-After: %d\r\n"
        b"Connection: close\r\n\r\n%s" % (content_type, len(body), retry_after, body)
    )


def close_idle_connection(connections: dict[Any, Any]) -> bool:
    """Of an aiohttp low-level server's connections (``web.Server._connections``), close the one idle the longest
    (no request in progress or queued, and no bytes waiting unread: a request on its way is not idleness) to make
    room for a new one: True, or False when every one is busy. Called only when the server is full, so the scan
    costs nothing otherwise."""
    idle = [h for h in connections if not h._request_in_progress and not h._messages and not h._force_close]
    for handler in sorted(idle, key=lambda h: h._next_keepalive_close_time):
        if unread_bytes(handler.transport):
            continue  # a request the loop has not read yet (a burst of accepts delays it): not idle
        handler.force_close()
        connections.pop(handler, None)  # its connection_lost comes later: the room is needed now
        return True
    return False


def unread_bytes(transport: asyncio.BaseTransport | None) -> int:
    """Bytes the kernel holds for ``transport``'s socket that the loop has not read yet (0 when it has none or
    cannot tell)."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return 0
    try:
        waiting = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except (OSError, ValueError):  # closed meanwhile
        return 0
    return int(struct.unpack("i", waiting)[0])


class BoundedConnection(web.RequestHandler):
    """One connection: refused at once when the server is full of busy connections."""

    _manager: BoundedServer | None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        manager = self._manager
        assert manager is not None
        if manager.open >= manager.max_connections and not manager.evict_idle():
            manager.count(manager.refused_reason)
            self._manager = None  # connection_lost has nothing to undo
            writable: Any = transport
            writable.write(manager.refusal)
            writable.close()
            return
        super().connection_made(transport)


class BoundedServer(web.Server):
    """aiohttp's low-level server with at most ``max_connections`` connections (see the module); a subclass may
    make its own protocol (``connection_class``, a :class:`BoundedConnection`)."""

    connection_class: type[BoundedConnection] = BoundedConnection

    def __init__(
        self,
        handler: Any,
        *,
        max_connections: int,
        refusal: bytes,
        count: Callable[[str], object],
        refused_reason: str,
        idle_closed_reason: str,
        **kwargs: Any,
    ) -> None:
        """``refusal``: the bytes sent to a connection refused (:func:`refusal`); ``count(reason)`` counts it
        under ``refused_reason``, and an idle connection closed to make room under ``idle_closed_reason``.
        ``kwargs`` go to aiohttp's ``web.Server``."""
        super().__init__(handler, **kwargs)
        self.max_connections = max_connections
        self.refusal = refusal
        self.count = count
        self.refused_reason = refused_reason
        self.idle_closed_reason = idle_closed_reason

    @property
    def open(self) -> int:
        """Connections open now (a length: safe to read from another thread)."""
        return len(self._connections)

    def evict_idle(self) -> bool:
        """Close the connection idle the longest (see :func:`close_idle_connection`): True, or False when every
        connection is busy. Only called when full."""
        if not close_idle_connection(self._connections):
            return False
        self.count(self.idle_closed_reason)
        return True

    def __call__(self) -> web.RequestHandler:
        return self.connection_class(self, loop=self._loop, **self._kwargs)
