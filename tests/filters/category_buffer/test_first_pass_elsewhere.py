"""A first pass made in another process (issue 28 item 7): batches wait, unreleased, for its result, then release
exactly what a first pass made in place releases; the forked child and its failure (the pass is then made here)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.category_buffer import CategoryBufferConfig, CategoryBufferFilter
from filters.category_buffer.firstpass import Waiting, pack_result, unpack_result
from filters.category_buffer.pairs import shared_pair_array, shared_pairs
from sidecar import prescan
from sidecar.api import BuildContext, Event
from sidecar.codecs import SchemaConfig
from sidecar.config import load_config
from sidecar.drive import replay
from sidecar.pipeline import codec_lookup
from sidecar.state import StateStore


def make(tmp: Path, seed: int) -> CategoryBufferFilter:
    ctx = BuildContext(
        config_dir=tmp, state=StateStore(tmp), rng=random.Random(seed), seed=seed, codecs=codec_lookup(SchemaConfig())
    )
    ctx.clock = lambda: 1000.0
    return CategoryBufferFilter(CategoryBufferConfig(k=3, avoid_repeat_pairs=50), ctx)


def events(n: int, seed: int) -> list[Event]:
    """Users of unequal activity sending few texts (many shared pairs: the first pass matters)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        e = Event(f"u{min(int(rng.paretovariate(1.3)), 30)}", f"q{rng.randrange(25)}", f"{i:06d}", "", "")
        e.annotate("category", f"C{rng.randrange(4)}")
        out.append(e)
    return out


class Pending:
    """A first pass elsewhere whose result comes after ``after`` looks (``done()``); counts ``result()`` calls."""

    def __init__(self, blob: bytes, after: int) -> None:
        self.blob, self.after, self.looks, self.taken = blob, after, 0, 0

    def done(self) -> bool:
        self.looks += 1
        return self.looks > self.after

    def result(self) -> bytes:
        self.taken += 1
        return self.blob


def released(out: list[Event]) -> list[tuple[object, ...]]:
    return [(e.user, e.query, e.time) for e in out]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), after=st.integers(0, 40), limit=st.integers(1, 3000), final=st.booleans())
def test_waiting_batches_release_what_a_first_pass_in_place_releases(
    tmp_path_factory: pytest.TempPathFactory, seed: int, after: int, limit: int, final: bool
) -> None:
    """Whenever the result comes (after some batches, at the wait limit, or only at the final flush), the
    release, its order, the counts and what stays held are those of prescan() then process()."""
    evs = events(1000, seed)
    batches = [evs[i : i + 37] for i in range(0, len(evs), 37)]
    here = make(tmp_path_factory.mktemp("here"), seed)
    here.prescan(batches)
    expected = [e for b in batches for e in here.process(b)] + here.flush(final)
    there = make(tmp_path_factory.mktemp("there"), seed)
    pending = Pending(there.prescan_collect(batches), after if not final else len(batches) + 1)
    there.prescan_later(pending)
    assert there._waiting is not None
    there._waiting.limit = limit
    got: list[Event] = []
    for b in batches:
        got += there.process(b)
        if there._waiting is not None:  # still waiting: nothing left, every event counted as held
            assert not got and there.held() == sum(map(len, batches[: batches.index(b) + 1]))
    got += there.flush(final)
    assert released(got) == released(expected) and got
    assert there.held() == here.held() and there.counts == here.counts and pending.taken == 1


def test_the_result_crosses_processes_as_bytes() -> None:
    evs = events(800, 4)
    read, shared = shared_pairs([evs])
    assert unpack_result(pack_result(*shared_pair_array([evs]))) == (read, shared) and read == 800 and shared
    assert unpack_result(pack_result(*shared_pair_array([]))) == (0, [])


def test_waiting_keeps_batches_until_the_result_or_the_limit() -> None:
    w = Waiting(Pending(b"", after=2), limit=10)
    batch = events(4, 1)
    assert not w.add(batch, 1.0) and not w.add(batch, 2.0)  # 8 events, pass not done
    assert w.add(batch, 3.0)  # 12 >= 10
    assert [now for _, now in w.batches] == [1.0, 2.0, 3.0] and w.events == 12
    assert Waiting(Pending(b"", after=0), limit=10).add(batch, 1.0)  # the pass is done


def test_a_forked_child_returns_its_work_and_a_dead_one_is_replaced_here() -> None:
    parent = os.getpid()
    ok = prescan.BackgroundPrescan(lambda: b"pairs" if os.getpid() != parent else b"made here")
    assert ok.result() == b"pairs"  # made in the child
    ok.close()  # twice is harmless

    def dies() -> bytes:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9 of the child mid-pass
        return b"made here"

    dead = prescan.BackgroundPrescan(dies)
    assert dead.result() == b"made here"

    def fails() -> bytes:
        if os.getpid() != parent:
            raise MemoryError
        return b"made here"

    assert prescan.BackgroundPrescan(fails).result() == b"made here"


CHAIN = """\
state_dir: {state}
dead_letter_file: null
schema: {{format: tsv, header: true}}
limits: {{batch_size: 40}}
filters:
  - category_buffer: {{k: 3, category_field: Cat, avoid_repeat_pairs: 50, max_k_policy: hold}}
"""


def replayed(tmp: Path, name: str, src: Path, during: Callable[[], None] | None = None) -> tuple[bytes, object, int]:
    state = tmp / f"state-{name}"
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(CHAIN.format(state=state), encoding="utf-8")
    out = tmp / f"{name}.tsv"
    summary = replay(load_config(cfg), str(src), str(out), seed=5, prescan=True)
    with sqlite3.connect(state / "querylog.db") as db:
        (held,) = db.execute("SELECT count(*) FROM category_buffer_held").fetchone()
    return out.read_bytes(), (summary.events_out, summary.events_held, summary.drop_reasons), held


def test_replay_with_the_first_pass_forked_writes_what_the_first_pass_in_place_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(8)
    lines = ["AnonID\tQuery\tQueryTime\tItemRank\tClickURL\tCat"]
    lines += [f"u{rng.randrange(40)}\tq{rng.randrange(30)}\t{i:06d}\t\t\tC{rng.randrange(3)}" for i in range(4000)]
    src = tmp_path / "in.tsv"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    forks: list[int] = []
    real = prescan.BackgroundPrescan.__init__

    def counted(self: prescan.BackgroundPrescan, work: Callable[[], bytes]) -> None:
        forks.append(1)
        real(self, work)

    monkeypatch.setattr(prescan.BackgroundPrescan, "__init__", counted)
    alone = threading.active_count() == 1  # threads an earlier test left running: no fork (as checked below)
    forked = replayed(tmp_path, "forked", src)
    assert forks == ([1] if alone else [])
    monkeypatch.setattr(prescan, "BACKGROUND", False)
    in_place = replayed(tmp_path, "here", src)
    assert len(forks) <= 1 and forked == in_place and forked[1][0] > 1000  # type: ignore[index]
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)  # another thread: never fork (the child would have one thread)
    monkeypatch.setattr(prescan, "BACKGROUND", True)
    before = len(forks)
    other.start()
    try:
        assert replayed(tmp_path, "threads", src) == in_place and len(forks) == before
    finally:
        stop.set()
        other.join()
