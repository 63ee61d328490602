"""What the ``nats`` source and sink need of NATS beyond nats-py: an event loop in a thread, streams and consumers
made sure of, and a pull consumer read without a task per message.

:class:`LoopThread` runs one asyncio loop in a daemon thread; the runtime's side (a sink's ``send``, a source's
``stop``) calls into it with :meth:`LoopThread.call`. :class:`Puller` reads a durable pull consumer with the
JetStream pull request itself (``$JS.API.CONSUMER.MSG.NEXT``, ``batch`` and ``expires``): nats-py's
``fetch`` waits on each message with a timer of its own and returns what came first, which caps it near 10k
messages/s here; the pull request answers with up to ``batch`` messages and ends with a status message (408
request expired, 404 no messages) or the count, read from one subscription callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.aio.subscription import Subscription
    from nats.js import JetStreamContext

log = structlog.get_logger("querylog.nats")
T = TypeVar("T")


class LoopThread:
    """One asyncio event loop running in a daemon thread of its own, until :meth:`close`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        self.loop.close()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (raises what it raised; TimeoutError after
        ``timeout``, the coroutine then cancelled)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what still runs on the loop, stop it and join the thread."""
        if not self._thread.is_alive():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):  # a loop already stopping: stop it anyway
            self.call(cancel_all(), timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)


async def ensure_stream(js: JetStreamContext, name: str, subjects: list[str]) -> None:
    """Create stream ``name`` (file storage) with ``subjects`` unless a stream of that name exists."""
    from nats.js.api import StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    with contextlib.suppress(NotFoundError):
        await js.stream_info(name)
        return
    await js.add_stream(StreamConfig(name=name, subjects=subjects, storage=StorageType.FILE))
    log.info("nats_stream_created", stream=name, subjects=len(subjects))


async def ensure_consumer(
    js: JetStreamContext, stream: str, name: str, subject: str, *, ack_wait: float, max_ack_pending: int
) -> None:
    """A durable pull consumer ``name`` of ``stream`` reading ``subject`` with explicit acks (created, or updated
    to this configuration when it exists: a durable consumer keeps its position either way)."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    config = ConsumerConfig(
        durable_name=name,
        filter_subject=subject,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=ack_wait,
        max_ack_pending=max_ack_pending,
        max_deliver=-1,
    )
    await js.add_consumer(stream, config)


def is_status(msg: Msg) -> str | None:
    """The status code of a status message (``408``, ``404``, ``409``, ``100``...), None for a message."""
    if msg.data:
        return None
    headers = msg.headers
    return headers.get("Status") if headers else None


def delivery(msg: Msg) -> tuple[int, int]:
    """``(stream sequence, times delivered)`` of a JetStream message, from its ack subject."""
    reply = msg.reply or ""
    if not reply.startswith("$JS.ACK."):
        return 0, 1
    tokens = reply.split(".")
    with contextlib.suppress(ValueError):
        if len(tokens) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
            return int(tokens[5]), int(tokens[4])
        if len(tokens) >= 12:  # $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<delivered>.<sseq>...
            return int(tokens[7]), int(tokens[6])
    return 0, 1


class Puller:
    """A durable pull consumer read with JetStream pull requests on one subscription (see the module)."""

    def __init__(self, nc: Client, stream: str, consumer: str) -> None:
        self.nc = nc
        self.next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self.inbox = nc.new_inbox()
        self.sub: Subscription | None = None
        self._msgs: list[Msg] = []
        self._request = 0
        self._want = 0
        self._done = asyncio.Event()

    async def start(self) -> None:
        self.sub = await self.nc.subscribe(f"{self.inbox}.*", cb=self._on_msg, pending_msgs_limit=1_000_000)

    async def _on_msg(self, msg: Msg) -> None:
        status = is_status(msg)
        if status is None:
            self._msgs.append(msg)  # a message of an earlier request too: it was delivered, keep it
            if len(self._msgs) >= self._want:
                self._done.set()
        elif status != "100" and msg.subject == f"{self.inbox}.{self._request}":
            self._done.set()  # this request ended (expired, no messages, consumer changed...)

    async def fetch(self, batch: int, wait: float) -> list[Msg]:
        """Up to ``batch`` messages, waiting at most ``wait`` seconds for the first ones."""
        if len(self._msgs) < batch:
            self._request += 1
            self._want = batch
            self._done.clear()
            body = {"batch": batch - len(self._msgs), "expires": int(wait * 1e9)}
            await self.nc.publish(self.next_subject, json.dumps(body).encode(), reply=f"{self.inbox}.{self._request}")
            with contextlib.suppress(TimeoutError):  # the server did not answer (a reconnect): what came is taken
                await asyncio.wait_for(self._done.wait(), wait + 5.0)
        msgs, self._msgs = self._msgs[:batch], self._msgs[batch:]
        return msgs

    async def stop(self) -> None:
        if self.sub is not None:
            with contextlib.suppress(Exception):  # the connection closed meanwhile
                await self.sub.unsubscribe()
            self.sub = None


class Publisher:
    """JetStream publishing of a batch on one reply subscription: every message published with a reply subject
    of its own (``<inbox>.<batch>-<i>``), the publish acknowledgements counted by one callback (nats-py's
    ``publish_async`` waits on a semaphore with a timer per message, the cost that mattered here)."""

    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self.inbox = nc.new_inbox()
        self.sub: Subscription | None = None
        self._batch = 0
        self._want = 0
        self._acks: dict[int, bool | None] = {}  # message index -> duplicate (False: stored), None: refused
        self._done = asyncio.Event()

    async def start(self) -> None:
        self.sub = await self.nc.subscribe(f"{self.inbox}.*", cb=self._on_ack, pending_msgs_limit=1_000_000)

    async def _on_ack(self, msg: Msg) -> None:
        batch, _, index = msg.subject.rpartition(".")[2].partition("-")
        if batch != str(self._batch) or not index.isdigit():
            return  # the answer to an earlier batch that timed out
        ok: bool | None = None
        if msg.data and is_status(msg) is None:
            try:
                answer = json.loads(msg.data)
            except ValueError:
                answer = {"error": True}
            if isinstance(answer, dict) and "error" not in answer and "seq" in answer:
                ok = bool(answer.get("duplicate", False))
        self._acks[int(index)] = ok  # a status message (503: no stream for the subject) is a refusal
        if len(self._acks) >= self._want:
            self._done.set()

    async def publish(
        self, items: list[tuple[str, str, bytes]], stream: str | None, timeout: float
    ) -> tuple[int, int, int]:
        """Publish ``(subject, message id, data)`` items; ``(stored, duplicates, refused)`` once every one was
        answered. TimeoutError when answers are missing after ``timeout`` seconds."""
        self._batch += 1
        self._want, self._acks = len(items), {}
        self._done.clear()
        prefix = f"{self.inbox}.{self._batch}-"
        publish = self.nc.publish
        for i, (subject, msg_id, data) in enumerate(items):
            headers = {"Nats-Msg-Id": msg_id}
            if stream is not None:
                headers["Nats-Expected-Stream"] = stream
            await publish(subject, data, reply=f"{prefix}{i}", headers=headers)
        if items:
            await self.nc.flush(timeout=max(1, int(timeout)))
            await asyncio.wait_for(self._done.wait(), timeout)
        answers = list(self._acks.values())
        refused = sum(1 for a in answers if a is None)
        duplicates = sum(1 for a in answers if a)
        return len(answers) - refused - duplicates, duplicates, refused

    async def stop(self) -> None:
        if self.sub is not None:
            with contextlib.suppress(Exception):
                await self.sub.unsubscribe()
            self.sub = None
