"""One host for asynchronous servers: an event loop on a thread, a bounded worker pool, a graceful stop, counters.

A network source (gRPC, Vector, forward, HTTP) supplies a :class:`ServerProtocol` — its handlers, nothing
else — and runs it on a :class:`ServerHost`:

* **The loop.** :meth:`ServerHost.start` starts an asyncio event loop on a thread of its own and runs the
  protocol's ``start(host)`` there: it binds its sockets (TCP, UDP, a ``grpc.aio`` server, an aiohttp
  low-level server...) and returns the addresses it listens on, port 0 resolved. Every handler is a coroutine
  on that loop: accepting, reading, framing, answering, health checks. A connection or stream waiting for
  input is a suspended coroutine, never a thread, so idle clients cost no thread and never starve others.
* **The workers.** Chain work (decode, ``Runtime.receive``/``transform``, encode) blocks: a handler hands it
  to :meth:`ServerHost.run_in_worker` (a pool of ``workers`` threads) and awaits it, so a slow chain never
  holds up the loop. :meth:`ServerHost.work` does the same, except that a call a running estimate says takes
  under :data:`INLINE_SECONDS` runs on the loop itself (a thread hop would cost more) **when the runtime's
  lock is free**: the loop only *tries* the lock (``acquire(blocking=False)``) and runs the call holding it;
  when another source's batch holds it, the call goes to a worker, which waits for the lock there. The loop
  never waits on the lock. :meth:`ServerHost.run_aside` has one thread of its own for quick calls (stats)
  that must not queue behind batches.
* **Stop** (:meth:`ServerHost.stop`, from any thread): the protocol's ``stop(host, grace)`` runs on the loop —
  it stops accepting (and says NOT_SERVING), lets in-flight requests finish within ``grace`` (see
  :meth:`ServerHost.drain` for requests counted with :meth:`ServerHost.track`), then ends what is left. Then
  the host cancels whatever still runs on the loop, lets worker calls already running finish (queued calls of
  requests that were cut short are dropped: they were never acknowledged), stops and closes the loop. The
  runtime stays open: its owner (``serve``) does the final release and closes it.
* **Counters** (:meth:`ServerHost.count`, :meth:`ServerHost.stats`): connections and requests by outcome, as
  the protocol names them. Counts only, never a value.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import structlog

from sidecar.api import BuildContext, ConfigValueError, Listen, ServerTls, TlsFiles

if TYPE_CHECKING:
    import grpc

log = structlog.get_logger("querylog.serving")

T = TypeVar("T")

#: A call estimated to take less than this runs on the event loop (no thread hop) when the lock is free.
INLINE_SECONDS = 0.002
#: Calls smaller than this many bytes are costed as this size (their fixed overhead dominates).
MIN_COST_BYTES = 4096
#: Weight of the last call in the running cost estimate.
COST_WEIGHT = 0.2
#: After ``grace``, how long the stop may take to cancel what is left before the loop is closed anyway.
STOP_SLACK_SECONDS = 10.0


class TryLock(Protocol):
    """What the host needs of the runtime's lock (``threading.RLock``)."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


class ServerProtocol(Protocol):
    """A server's handlers, run by a :class:`ServerHost` (both methods are coroutines on the host's loop)."""

    async def start(self, host: ServerHost) -> list[Listen]:
        """Bind and start serving; the addresses bound (port 0 resolved). Raise ``OSError`` if it cannot."""
        ...

    async def stop(self, host: ServerHost, grace: float) -> None:
        """Stop accepting, let in-flight requests finish within ``grace`` seconds, then end the rest."""
        ...


class ServerHost:
    """Runs one :class:`ServerProtocol`: loop thread, workers, stop with grace, counters (see the module)."""

    def __init__(self, name: str, *, workers: int = 4, lock: TryLock | None = None) -> None:
        """``name`` names the threads (``querylog-<name>``); ``lock`` is the runtime's lock, which
        :meth:`work` tries before running a cheap call on the loop (None: never inline)."""
        self.name = name
        self.workers = workers
        self.listening: list[Listen] = []
        self._lock = lock
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"querylog-{name}")
        self._aside: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._protocol: ServerProtocol | None = None
        self._counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()
        self._inflight = 0
        self._idle: asyncio.Event | None = None
        #: running estimate of a call's cost, seconds per byte (None until one was measured)
        self.cost: float | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self, protocol: ServerProtocol) -> list[Listen]:
        """Start the loop thread and ``protocol`` on it; returns once it listens (its bound addresses)."""
        if self._loop is not None:
            raise RuntimeError("already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name=f"querylog-{self.name}-loop", daemon=True)
        self._thread.start()
        try:
            self.listening = self.call(self._start(protocol))
        except BaseException:
            self._close_loop()
            self._pool.shutdown(wait=False, cancel_futures=True)
            raise
        self._protocol = protocol
        return self.listening

    async def _start(self, protocol: ServerProtocol) -> list[Listen]:
        self._idle = asyncio.Event()
        self._idle.set()
        return list(await protocol.start(self))

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The host's event loop (started)."""
        if self._loop is None:
            raise RuntimeError("the host is not running")
        return self._loop

    @property
    def running(self) -> bool:
        return self._loop is not None

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop from another thread and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self, grace: float) -> None:
        """Stop the protocol with ``grace`` seconds for in-flight requests, then the workers and the loop.
        Idempotent; call it from any thread but the loop's."""
        if self._loop is None:
            return
        if self._protocol is not None:
            try:
                self.call(self._stop(self._protocol, grace), timeout=grace + STOP_SLACK_SECONDS)
            except (concurrent.futures.TimeoutError, TimeoutError):
                log.warning("server_stop_timeout", server=self.name, grace=grace)
            except Exception as exc:  # a protocol's stop failed: still end the workers and the loop
                log.error("server_stop_failed", server=self.name, error=type(exc).__name__)
        # the calls already running finish (the loop still runs, so their results can be set); queued ones
        # belong to requests cut short and are dropped: nothing of them was acknowledged
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._aside is not None:
            self._aside.shutdown(wait=True, cancel_futures=True)
        self._close_loop()
        self._protocol = None

    async def _stop(self, protocol: ServerProtocol, grace: float) -> None:
        await protocol.stop(self, grace)
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_SLACK_SECONDS)
        with contextlib.suppress(Exception):
            await asyncio.get_running_loop().shutdown_asyncgens()

    def _close_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join()
        with contextlib.suppress(Exception):  # the callbacks still due (a transport closing its socket) run: else
            for _ in range(3):  # a connection accepted while stopping stays open, its client waiting for an answer
                loop.run_until_complete(asyncio.sleep(0))
        loop.close()
        gc.collect()  # a socket accepted by a task cancelled before it ran is freed (closed) only with its cycle
        self._loop = self._thread = None

    # ---- work ------------------------------------------------------------------------------------
    async def run_in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on a worker thread; the loop serves others meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def run_aside(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the host's one side thread (quick calls, e.g. stats: never behind batches)."""
        if self._aside is None:
            self._aside = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"querylog-{self.name}-aside")
        return await asyncio.get_running_loop().run_in_executor(self._aside, fn, *args)

    async def work(self, fn: Callable[..., T], size: int, *args: Any) -> T:
        """Run ``fn(*args)`` for a request of ``size`` bytes: on the loop itself when the running estimate says
        it takes under :data:`INLINE_SECONDS` and the lock is free (tried, never waited for), else on a worker.
        ``fn`` must take the runtime's lock itself where it needs it (it is re-entrant)."""
        cost, lock = self.cost, self._lock
        cheap = cost is not None and cost * max(size, MIN_COST_BYTES) < INLINE_SECONDS
        if cheap and lock is not None and lock.acquire(False):
            try:
                return self._timed(fn, size, *args)
            finally:
                lock.release()
        return await self.run_in_worker(self._timed, fn, size, *args)

    def _timed(self, fn: Callable[..., T], size: int, *args: Any) -> T:
        started = time.perf_counter()
        try:
            return fn(*args)
        finally:
            per_byte = (time.perf_counter() - started) / max(size, MIN_COST_BYTES)
            cost = self.cost
            self.cost = per_byte if cost is None else cost + (per_byte - cost) * COST_WEIGHT

    # ---- in-flight requests and counters ---------------------------------------------------------
    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        """Count a request in flight for its block (on the loop): :meth:`drain` waits for these."""
        assert self._idle is not None, "start() first"
        self._inflight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()

    @property
    def inflight(self) -> int:
        """Requests in flight (counted with :meth:`track`)."""
        return self._inflight

    async def drain(self, grace: float) -> bool:
        """Wait until no tracked request is in flight, at most ``grace`` seconds; True when none is left."""
        assert self._idle is not None, "start() first"
        try:
            async with asyncio.timeout(grace):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``key`` (``requests_ok``, ``connections_closed_eof``...); any thread."""
        with self._counts_lock:
            self._counts[key] += n

    def stats(self) -> dict[str, int]:
        """The counters, and ``requests_in_flight``: counts only."""
        with self._counts_lock:
            out = dict(self._counts)
        out["requests_in_flight"] = self._inflight
        return out


def ssl_server_context(tls: ServerTls, ctx: BuildContext) -> ssl.SSLContext | None:
    """The ``ssl.SSLContext`` of a server configured with :class:`~sidecar.api.ServerTls` (None: no TLS): its
    certificate and key; with ``tls_client_ca_file``, every client must present a certificate signed by that CA
    (mutual TLS). A file that does not load is a :class:`~sidecar.api.ConfigValueError` at its key (the file's
    content is never shown)."""
    if tls.tls_cert_file is None or tls.tls_key_file is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(ctx.resolve(tls.tls_cert_file), ctx.resolve(tls.tls_key_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigValueError("tls_cert_file", f"cannot load the TLS certificate/key: {type(exc).__name__}") from None
    if tls.tls_client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=ctx.resolve(tls.tls_client_ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigValueError(
                "tls_client_ca_file", f"cannot load the client CA certificate(s): {type(exc).__name__}"
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def grpc_server_credentials(tls: TlsFiles | None) -> grpc.ServerCredentials | None:
    """A gRPC server's credentials for :meth:`~sidecar.api.ServerTls.server_tls`'s files (None: plaintext); with a
    client CA, every client must present a certificate signed by it (mutual TLS)."""
    if tls is None:
        return None
    import grpc

    if tls.client_ca is None:
        return grpc.ssl_server_credentials([(tls.key, tls.cert)])
    return grpc.ssl_server_credentials([(tls.key, tls.cert)], root_certificates=tls.client_ca, require_client_auth=True)
