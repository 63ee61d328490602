"""Which connection ``close_idle_connection`` closes to make room: the one idle the longest, never one whose
request is waiting unread in the kernel (a burst of accepts can delay the loop's read of a good client's request
past the next accept: closing it then reset that client, 1 in 15 runs of the 1,100-idle-connections test)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from sidecar.boundedhttp import close_idle_connection, unread_bytes


@dataclass
class _Transport:
    sock: socket.socket | None

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else None


@dataclass(eq=False)
class _Handler:
    """The attributes of aiohttp's RequestHandler the eviction reads (aiohttp 3.14), over a real socket."""

    _next_keepalive_close_time: float
    transport: _Transport
    _request_in_progress: bool = False
    _messages: list[object] = field(default_factory=list)
    _force_close: bool = False

    def force_close(self) -> None:
        self._force_close = True


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made: list[tuple[socket.socket, socket.socket]] = []
    yield made
    for a, b in made:
        a.close()
        b.close()


def _connection(pairs: list[tuple[socket.socket, socket.socket]], close_time: float, sent: bytes = b"") -> _Handler:
    server_end, client_end = socket.socketpair()
    pairs.append((server_end, client_end))
    if sent:
        client_end.sendall(sent)
    return _Handler(close_time, _Transport(server_end))


def test_the_longest_idle_is_closed(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    old, new = _connection(pairs, 10.0), _connection(pairs, 20.0)
    connections: dict[Any, Any] = {new: None, old: None}
    assert close_idle_connection(connections)
    assert old._force_close and not new._force_close
    assert list(connections) == [new]


def test_a_request_waiting_unread_is_not_idleness(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    waiting = _connection(pairs, 10.0, sent=b"POST / HTTP/1.1\r\n")
    idle = _connection(pairs, 20.0)
    connections: dict[Any, Any] = {waiting: None, idle: None}
    assert close_idle_connection(connections)
    assert idle._force_close and not waiting._force_close
    assert list(connections) == [waiting]


def test_busy_connections_and_waiting_requests_leave_nothing_to_close(
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    waiting = _connection(pairs, 10.0, sent=b"G")
    busy = _connection(pairs, 5.0)
    busy._request_in_progress = True
    queued = _connection(pairs, 6.0)
    queued._messages.append(object())
    connections: dict[Any, Any] = {waiting: None, busy: None, queued: None}
    assert not close_idle_connection(connections)
    assert len(connections) == 3 and not any(h._force_close for h in connections)


def test_unread_bytes_counts_what_the_kernel_holds(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    handler = _connection(pairs, 1.0, sent=b"12345")
    assert unread_bytes(handler.transport) == 5  # type: ignore[arg-type]
    assert unread_bytes(None) == 0
    assert unread_bytes(_Transport(None)) == 0  # type: ignore[arg-type]
    pairs[0][0].close()
    assert unread_bytes(handler.transport) == 0  # type: ignore[arg-type]  # closed meanwhile
