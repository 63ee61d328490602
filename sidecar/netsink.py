"""What the HTTP-based network sinks share: a keep-alive HTTP client, batching into an outbox, dead letters.

A network sink encodes events into lines (``write``), cuts them into batches bounded by events and bytes,
and puts each batch into the durable outbox its build context gave it (``ctx.outbox(name, config)``, the
:class:`~sidecar.api.Outbox` of the contract; ``flush``, inside the runtime's transaction); the outbox's
sender thread calls the sink's ``send(payload)``, which POSTs the batch with :class:`HttpClient` and either
returns (delivered, or dead-lettered for good) or raises :class:`PeerUnavailable` (the outbox keeps the
batch and retries it with backoff and jitter).

This module is a helper library at the plugins' level, not part of the runtime: it imports nothing of the
sidecar but the contract (``sidecar.api``), so a sink that uses it still depends on the contract alone.

Nothing here logs or raises with a payload, a header value or a peer's answer text: status codes,
exception type names and counts only (a peer's error text may quote the record it refused).
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from sidecar.api import BuildContext, ConfigValueError, DeadLetterSink, Event, Outbox

__all__ = [
    "HttpClient",
    "LineBatcher",
    "PeerAnswer",
    "PeerUnavailable",
    "Undelivered",
    "basic_auth",
    "close_outbox",
    "dead_letter_event",
    "dead_letter_payload",
    "outbox_stats",
    "read_secret",
]

#: How much of a peer's answer is kept (enough for an error code; the rest is read and dropped).
ANSWER_LIMIT = 64 * 1024


class PeerUnavailable(Exception):
    """The peer did not take a batch now (connection error, timeout, 5xx, 408, 429...): send it again later.

    The message names the peer (its address, never credentials) and a status or an exception type name only.
    """


@dataclass(frozen=True)
class PeerAnswer:
    """A peer's HTTP answer: the status, the ``Retry-After`` header (seconds, if given) and the start of the body."""

    status: int
    body: bytes
    retry_after: float | None = None


def read_secret(
    ctx: BuildContext, env: str | None, file: str | None, env_key: str, file_key: str, what: str
) -> bytes | None:
    """A secret from ``env`` or ``file`` (None when neither is set); a problem is reported at the option's key."""
    if env is None and file is None:
        return None
    try:
        return ctx.secret(env, file, what)
    except ConfigValueError as exc:
        raise ConfigValueError(env_key if env is not None else file_key, exc.problem) from None


def basic_auth(user: str, password: bytes) -> str:
    """The value of an ``Authorization: Basic`` header."""
    return "Basic " + base64.b64encode(user.encode("utf-8") + b":" + password).decode("ascii")


class HttpClient:
    """One keep-alive HTTP/1.1 connection to one peer (``http://`` or ``https://``), re-opened after a failure.

    Thread-safe (one request at a time). ``request`` returns the peer's answer, whatever its status, or raises
    :class:`PeerUnavailable` when there is none (connection refused or reset, timeout, TLS failure).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        headers: Mapping[str, str] | None = None,
        ca_file: str | None = None,
        client_cert: tuple[str, str] | None = None,
    ) -> None:
        """``client_cert``: the (certificate, key) PEM files presented to a peer requiring mutual TLS (https)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the url must be http://host[:port][/path] or https://...")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.path = parts.path or "/"
        self.query = parts.query
        #: The peer for logs and errors: scheme, host and port, never a path's query or credentials.
        self.peer = f"{parts.scheme}://{self.host}:{self.port}"
        self.timeout = timeout
        self.headers = dict(headers or {})
        self._context: ssl.SSLContext | None = None
        if self.tls:
            self._context = ssl.create_default_context(cafile=ca_file)
            if client_cert is not None:
                self._context.load_cert_chain(*client_cert)
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self.tls:
                self._conn = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout, context=self._context
                )
            else:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self._conn

    def request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        keep: int = ANSWER_LIMIT,
    ) -> PeerAnswer:
        """Send one request (``target``: path and query) and read the whole answer (its body kept up to ``keep``
        bytes, the rest read and dropped)."""
        with self._lock:
            for attempt in (1, 2):  # a kept-alive connection the peer closed meanwhile: once more on a new one
                fresh = self._conn is None
                conn = self._connection()
                try:
                    conn.request(method, target, body=body, headers={**self.headers, **(headers or {})})
                    resp = conn.getresponse()
                    data = resp.read(keep)
                    while resp.read(ANSWER_LIMIT):  # drain the rest so the connection can be reused
                        pass
                    retry_after = _seconds(resp.getheader("Retry-After"))
                    if resp.will_close:
                        self._close()
                    return PeerAnswer(resp.status, data, retry_after)
                except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                    self._close()
                    if fresh or attempt == 2:
                        raise PeerUnavailable(f"{self.peer}: {type(exc).__name__}") from None
                except (OSError, http.client.HTTPException) as exc:
                    self._close()
                    raise PeerUnavailable(f"{self.peer}: {type(exc).__name__}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._close()


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: the outbox's own backoff applies


class LineBatcher:
    """Encoded lines into outbox batches of at most ``max_events`` lines and about ``max_bytes`` bytes.

    ``add`` puts a batch as soon as it is full; ``flush`` puts what is left (the sink's delivery point).
    Both run inside the runtime's transaction, so the batches commit with it. When the outbox refuses a
    batch (:class:`~sidecar.api.Backpressure`, raised to the runtime: the source must not acknowledge), the
    lines stay here and go out with the next flush: never dropped (at worst delivered twice).
    """

    def __init__(self, outbox: Outbox, max_events: int, max_bytes: int) -> None:
        self.outbox = outbox
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._lines: list[bytes] = []
        self._size = 0
        self._ready: list[list[bytes]] = []  # full batches not yet taken by the outbox

    def add(self, line: bytes) -> None:
        if self._lines and (len(self._lines) >= self.max_events or self._size + len(line) + 1 > self.max_bytes):
            self._ready.append(self._lines)
            self._lines, self._size = [], 0
        self._lines.append(line)
        self._size += len(line) + 1
        if self._ready:
            self._put_ready()

    def flush(self) -> None:
        if self._lines:
            self._ready.append(self._lines)
            self._lines, self._size = [], 0
        self._put_ready()

    def _put_ready(self) -> None:
        while self._ready:
            lines = self._ready[0]
            self.outbox.put(b"\n".join(lines) + b"\n", len(lines))  # Backpressure: kept for the next flush
            self._ready.pop(0)

    def pending(self) -> int:
        """Lines not yet in the outbox."""
        return len(self._lines) + sum(len(b) for b in self._ready)


def dead_letter_payload(dead: DeadLetterSink | None, reason: str, origin: str, payload: bytes) -> int:
    """Dead-letter every line of a batch (one entry per event, the line in the file only); returns the count."""
    lines = [line for line in payload.split(b"\n") if line]
    if dead is None:
        return len(lines)
    for line in lines:
        try:
            record: bytes | str = line.decode("utf-8")
        except UnicodeDecodeError:
            record = line
        dead.add(reason, origin, None, record)
    dead.flush()
    return len(lines)


def outbox_stats(counts: Mapping[str, int], outbox: Outbox | None) -> dict[str, Any]:
    """A network sink's ``stats()``: its own counters and its outbox's (counts only)."""
    out: dict[str, Any] = dict(counts)
    if outbox is not None:
        out.update(outbox.stats())
    return out


class Undelivered(NamedTuple):
    """What an outbox still held when its sink closed (kept for the next start)."""

    batches: int
    events: int


def close_outbox(
    outbox: Outbox, batcher: LineBatcher | None, drain_seconds: float, client: HttpClient
) -> Undelivered | None:
    """A network sink's ``close``: put what is buffered into the outbox, keep sending for ``drain_seconds``,
    stop the sender and the client. Returns what is left undelivered (kept for the next start), or None."""
    try:
        if batcher is not None and batcher.pending():
            batcher.flush()
    finally:
        drained = outbox.drain(drain_seconds) if drain_seconds else False
        stats = outbox.stats()
        outbox.close()
        client.close()
    left = Undelivered(int(stats.get("pending_batches", 0)), int(stats.get("pending_events", 0)))
    return left if not drained and left.batches else None


def dead_letter_event(dead: DeadLetterSink | None, reason: str, origin: str, event: Event) -> None:
    """A record a network sink cannot encode: its roles, as JSON, into the dead-letter file (counted there)."""
    if dead is not None:
        roles = {"user": event.user, "query": event.query, "time": event.time, "rank": event.rank, "url": event.url}
        dead.add(reason, origin, None, json.dumps(roles, default=str))
