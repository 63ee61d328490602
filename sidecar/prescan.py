"""The first pass over a rewindable input (``replay --prescan``): the whole archive through the filters in front
of the chain's first ``PRESCAN`` filter, before (or, forked, beside) the real pass. :mod:`sidecar.drive` runs it."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import Any

import structlog

from sidecar.api import BuildContext, Event, Filter, RecordBatch
from sidecar.deadletter import DeadLetters
from sidecar.fieldpolicy import FieldPolicies
from sidecar.pipeline import Pipeline

log = structlog.get_logger("querylog.replay")

#: False: every first pass is made in place, before the real pass (for tests that count its calls here)
BACKGROUND = True
#: False: the forked child is not sent SIGKILL when the replay dies (tests of the fallback: :func:`_orphaned`)
DEATH_SIGNAL = True
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
#: in the forked child: the replay's pid (the child ends when that process is gone); None in the replay itself
_parent: int | None = None


class PrescanError(ValueError):
    """A first pass cannot be made with this chain or input; ``reason`` is a short code for logs."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def prescan(pipeline: Pipeline, source: Any, background: bool = False) -> BackgroundPrescan | None:
    """Feed the whole input of a rewindable ``source`` (``prescan_batches()``) to the chain's first ``PRESCAN``
    filter, through the filters in front of it (:class:`PrescanError` when the input or the chain cannot).

    Those must not declare ``STATEFUL`` and must be deterministic (the built-in stateless filters are). The first
    pass runs the pipeline's own instances of them (building a chain twice cost more than a second at every
    start). Meanwhile each sees a first-pass context (``Filter.ctx``: no state store, dead letters counted
    nowhere, so the real pass reports bad records once) and its ``counts`` are put back afterwards (the real pass
    counts each event once). A filter that only annotates (``annotates_only``: ``classify`` with ``unknown:
    annotate``) is left out when the target reads no annotations (``PRESCAN_ROLES_ONLY``: ``category_buffer``):
    classifying each event in the first pass only warmed the classifier's cache (a warm pass over 625k events:
    0.6 s, about 4% of that archive's replay).

    ``background``: when the target can wait for a first pass made elsewhere (``prescan_later``, with
    ``prescan_collect``/``prescan_learn``: ``category_buffer``) and this process runs one thread, the first pass
    runs in a forked child process (:class:`BackgroundPrescan`, returned: close it when the run ends) while this
    one starts the real pass; the target holds its batches back until the result is in. Only where nothing is
    promised before those batches arrived: they are in no state store (a file replay without ``--resume``, or with
    it: its commit groups wait, :mod:`sidecar.commitgroups`)."""
    if not getattr(source, "rewindable", False):
        raise PrescanError("--prescan reads the input twice: give a file, not stdin or a pipe", "stdin")
    filters = pipeline.chain.filters
    index = next((i for i, f in enumerate(filters) if f.PRESCAN), None)
    if index is None:
        raise PrescanError(
            "--prescan: no filter of this chain uses a first pass (e.g. category_buffer)", "no_prescan_filter"
        )
    target = filters[index]
    stateful = next((f.NAME for f in filters[:index] if f.STATEFUL), None)
    if stateful is not None:
        raise PrescanError(
            f"--prescan: filter {stateful} in front of {target.NAME} keeps state; "
            "the filters in front of it must be stateless",
            "stateful_filter_in_front",
        )
    later = getattr(target, "prescan_later", None)
    if background and BACKGROUND and later is not None and threading.active_count() == 1:
        pending = BackgroundPrescan(lambda: _first_pass_result(pipeline, source, index))
        later(pending)
        return pending
    _first_pass_through(pipeline, source, index, target.prescan)
    return None


def _first_pass_result(pipeline: Pipeline, source: Any, index: int) -> bytes:
    """The target's ``prescan_collect`` over the first pass: what its ``prescan_learn`` takes."""
    out: list[bytes] = []
    collect = pipeline.chain.filters[index].prescan_collect  # type: ignore[attr-defined]
    _first_pass_through(pipeline, source, index, lambda events: out.append(collect(events)))
    return out[0]


def _first_pass_through(
    pipeline: Pipeline, source: Any, index: int, take: Callable[[Iterable[list[Event]]], object]
) -> None:
    """``take`` the first pass's events: the input through the filters in front of filter ``index``, each with a
    first-pass context while it runs (its own context and counts are put back afterwards)."""
    filters = pipeline.chain.filters
    target = filters[index]
    own = pipeline.ctx
    ctx = BuildContext(
        config_dir=own.config_dir,
        state=None,
        rng=own.rng,
        seed=own.seed,
        schema=own.schema,
        dead_letters=DeadLetters(None),
        clock=own.clock,
        codecs=own.codecs,
    )
    prefix: list[Filter[Any]] = filters[:index]
    saved = [(f.ctx, Counter(f.counts)) for f in prefix]
    try:
        for f in prefix:
            f.ctx = ctx
        passes = [f for f in prefix if not (target.PRESCAN_ROLES_ONLY and f.annotates_only())]
        take(_events(source.prescan_batches(), passes, pipeline.fields))
    finally:
        for f, (own_ctx, counts) in zip(prefix, saved, strict=True):
            f.ctx = own_ctx
            f.counts.clear()
            f.counts.update(counts)


class BackgroundPrescan:
    """A first pass made in a forked child process: ``done()`` once its result can be read, ``result()`` (blocks)
    the bytes the target's ``prescan_collect`` returned there. Forked, so the child shares this process's
    built chain and its salted ``hash`` (the pair hashes it makes are the ones this process makes). Should the
    child fail or die, ``result()`` makes the first pass here (logged ``prescan_child_failed``): slower, the same
    result."""

    def __init__(self, work: Callable[[], bytes]) -> None:
        mp = multiprocessing.get_context("fork")
        self._work = work
        self._conn, send = mp.Pipe(duplex=False)
        args = (send, work, os.getpid())
        self._child = mp.Process(target=_prescan_child, args=args, name="querylog-prescan", daemon=True)
        self._child.start()
        send.close()

    def done(self) -> bool:
        """True once ``result()`` will not wait for the child (its result or its end is there)."""
        return self._conn.closed or self._conn.poll()

    def waiting(self) -> bool:
        """True until the result was taken (or the run ended): the target still keeps batches back for it."""
        return not self._conn.closed

    def result(self) -> bytes:
        """The first pass's result (waits for the child; made here should the child fail)."""
        try:
            blob = self._conn.recv_bytes()
        except (EOFError, OSError):
            blob = b""
        self.close()
        if blob[:1] == b"\x01":
            return blob[1:]
        log.warning("prescan_child_failed", reason=blob[1:].decode("ascii", "replace") or "no_result")
        return self._work()

    def close(self) -> None:
        """Stop the child if it still runs (the run ended first) and release the pipe."""
        self._conn.close()
        if self._child.is_alive():
            self._child.kill()
        self._child.join()


def _prescan_child(conn: Connection, work: Callable[[], bytes], parent: int) -> None:
    """The child of :class:`BackgroundPrescan`: ``work()``, sent back as ``\\x01`` + bytes (``\\x00`` + the
    error's type name when it fails). SIGTERM and SIGINT end it (not the parent's stop flag), and so does the end
    of ``parent`` (a kill -9 of the replay: :func:`_die_with`). It holds no state-folder lock (closed at the fork:
    :mod:`sidecar.state`), so the replay's rerun never waits for it."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _die_with(parent)
    try:
        blob = b"\x01" + work()
    except Exception as exc:  # reported to the parent, which makes the first pass itself
        blob = b"\x00" + type(exc).__name__.encode("ascii")
    conn.send_bytes(blob)
    conn.close()


def _die_with(parent: int) -> None:
    """In the forked child: end when process ``parent`` ends. Linux: the kernel sends SIGKILL
    (``PR_SET_PDEATHSIG``); everywhere: the pass looks between its batches (:func:`_orphaned`)."""
    global _parent
    _parent = parent
    if DEATH_SIGNAL and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # no prctl: the look between batches is left
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _orphaned()  # the parent may have died before the signal was asked for


def _orphaned() -> None:
    """In the forked child: exit at once when the replay that forked it is gone (its parent pid changed)."""
    if _parent is not None and os.getppid() != _parent:
        os._exit(1)


def _events(
    batches: Iterable[RecordBatch], prefix: list[Filter[Any]], fields: FieldPolicies | None
) -> Iterable[list[Event]]:
    """The decodable events of ``batches``, through the field policies and the filters in ``prefix`` (the first
    pass dead-letters nothing: the real pass reports each bad record once)."""
    for batch in batches:
        _orphaned()
        events: list[Event] = batch.codec.decode_many(batch.records, "\n", [])
        if fields is not None and events:  # the users and fields the real pass will see (schema.fields)
            events = fields.first_pass(events)
        for f in prefix:
            if not events:
                break
            events = f.process(events)
        if events:
            yield events
