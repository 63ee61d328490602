"""``category_buffer``: paper 001's anonymizer (Algorithm 2), durable and pair-safe.

Paper 001, Algorithm 2: each category has a set of users and a set of queries.
An arriving event adds its user to the first and its query to the second; when
the category holds k and holds a user other than the arriving one, a random user
and a random query are popped and sent together; otherwise k <- k * delta.
Users keep their interests (same categories, same counts) while a query can be
tied to its sender with probability about 1/k.

What this implementation does differently, and why:

* **Pairs are never the original ones.** The paper draws user and query
  independently, so a user can get their own query back (about 1/k of the
  time; its "A(NR)" curve shows what that costs). Here a query and a user
  are drawn from the bucket with the CSPRNG (see ``user_draw`` below) and the
  pair is kept only when valid — the user is neither the query's sender nor
  a user known to have sent the same text (same words, case-folded) among
  buffered events, the last
  ``avoid_repeat_pairs`` events and the rest of the current batch. So the
  log matcher finds no protected (user, query) identical to an original one,
  except when that user sends that text only later (a streaming filter cannot
  know the future beyond its batch; popular queries make this happen).
  When an archive is replayed with ``replay --prescan``, the future is known:
  a first pass (:meth:`CategoryBufferFilter.prescan`) collects every pair whose
  text more than one user sends (only those can be re-created), and none of
  them is created either, so the matcher finds none at all.
* **k distinct users, not just k events.** The paper releases as soon as the
  set holds k events and one user other than the arriving one, so a query's
  anonymity set can be two users. When users arrive one after another (the
  AOL files are sorted by user), a random re-linking attack then recovers a
  large share of pairs (measured: 38% at k=5 on the AOL sample). Here a bucket
  releases only when its held users count at least ``min_users`` distinct
  users (default: the bucket's base k; ``min_users: 2`` is the paper's rule)
  and a valid pair exists; otherwise k becomes ceil(k * delta), as the paper
  does for its one-user case.
* **Users drawn uniformly among distinct users.** The paper's user set is a
  multiset, so a user with many held events is drawn more often — and is then
  seen in the output while their own queries are being released, which
  attackers 2-4 exploit. By default (``user_draw: user``) the user is drawn
  uniformly among the distinct valid users; a heavy user's backlog then
  leaves later, decorrelated from their queries (on the AOL sample at k=5 the
  best attack fell from 24% to 12% in file order, 14% to 10% in time order,
  at the price of holding more events). ``user_draw: slot`` is the paper's
  multiset draw.
* **k comes back.** The paper never lowers k again. With ``decay`` (default)
  every successful release steps an inflated k back toward its base
  (k <- max(base, min(k - 1, ceil(k / delta)))); several events may then leave
  at once, each still drawn from at least k held ones. ``decay: false`` keeps
  the paper's only-grows behaviour.
* **Durable**: every held event is a row in the SQLite state store; a batch's
  arrivals, releases and k changes commit in one transaction, so a restart or
  kill -9 resumes with exactly what was held after the last completed batch.
* **Bounded**: memory is O(events held): at most about the sum of k over the
  buckets in steady state, more only while one user alone fills a bucket, and
  never more than ``max_held`` events (the oldest of the largest bucket is then
  suppressed and counted). The number of users does not matter.
* **Events without a category** go to their own ``unknown`` bucket (or are
  dropped and counted with ``unknown: drop``, as the paper discarded them).

The released event is the query's own event (its record, so output keeps the
input schema and all query-side fields) with the user-side roles and fields of
the drawn user; its annotations are the query's (so ``profile`` counts the
query's category for the new user, exactly as the paper's profiler does).
"""

from __future__ import annotations

import math
import time as _time
from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np
import structlog

from filters.category_buffer.config import CategoryBufferConfig
from filters.category_buffer.rand import RandomPool
from filters.category_buffer.store import HeldStore, pack_event, unpack_event
from sidecar.api import BuildContext, ConfigValueError, Event, Filter

log = structlog.get_logger("querylog.category_buffer")

UNKNOWN = "unknown"
ROOT = "*"


def normalise_text(query: Any) -> str:
    """The text identity used for pair checks: words case-folded, whitespace collapsed."""
    return " ".join(str(query).casefold().split())


class Held:
    """One buffered event: its user half and its query half, and where each is still held.

    ``event`` is never modified (the output is a copy), so it can be written to
    the state store at any time. ``qidx`` is its position in the bucket's query
    list (O(1) random removal by swapping with the last element).
    """

    __slots__ = ("arrived", "event", "fmt", "new", "pair", "qbucket", "qidx", "row", "sender", "text",
                 "ubucket", "uvalues")

    def __init__(self, row: int, event: Event, sender: str, text: str, pair: int, arrived: float,
                 fmt: str | None, uvalues: tuple[Any, ...], bucket: str | None, new: bool) -> None:
        self.row = row
        self.event = event
        self.sender = sender
        self.text = text
        self.pair = pair
        self.arrived = arrived
        self.fmt = fmt
        self.uvalues = uvalues  # user role's value, the other user-side roles, then the user fields
        self.ubucket = bucket
        self.qbucket = bucket
        self.qidx = -1
        self.new = new


def _inc(d: dict[Any, int], key: Any) -> None:
    d[key] = d.get(key, 0) + 1


def _dec(d: dict[Any, int], key: Any) -> None:
    n = d[key] - 1
    if n:
        d[key] = n
    else:
        del d[key]


def _weighted(items: list[Any], weights: list[int], pick: int) -> Any:
    """The item at position ``pick`` (0 <= pick < sum(weights)) of the items repeated by weight."""
    for item, w in zip(items, weights):
        if pick < w:
            return item
        pick -= w
    raise ValueError("pick out of range")


class Bucket:
    """One category's user set and query set, and its current k.

    The user set is kept per user (``by_name``: that user's held user halves),
    so a user can be drawn uniformly among distinct users in O(distinct); the
    query set is a list with O(1) random removal. Both sets always have the
    same size: an arrival adds to both, a release takes one from each.
    """

    __slots__ = ("base", "by_name", "k", "name", "queries")

    def __init__(self, name: str, base: int) -> None:
        self.name = name
        self.base = base
        self.k = base
        self.by_name: dict[str, list[Held]] = {}  # held user halves per user
        self.queries: list[Held] = []

    def add_user(self, h: Held) -> None:
        h.ubucket = self.name
        slots = self.by_name.get(h.sender)
        if slots is None:
            self.by_name[h.sender] = [h]
        else:
            slots.append(h)

    def add_query(self, h: Held) -> None:
        h.qidx = len(self.queries)
        h.qbucket = self.name
        self.queries.append(h)

    def pop_user(self, name: str, i: int) -> Held:
        slots = self.by_name[name]
        h = slots[i]
        last = slots.pop()
        if last is not h:
            slots[i] = last
        if not slots:
            del self.by_name[name]
        h.ubucket = None
        return h

    def remove_user(self, h: Held) -> None:
        slots = self.by_name[h.sender]
        slots.remove(h)
        if not slots:
            del self.by_name[h.sender]
        h.ubucket = None

    def pop_query(self, i: int) -> Held:
        queries = self.queries
        h = queries[i]
        last = queries.pop()
        if last is not h:
            queries[i] = last
            last.qidx = i
        h.qbucket = None
        return h

    def users(self) -> list[Held]:
        return [h for slots in self.by_name.values() for h in slots]


class CategoryBufferFilter(Filter):
    """Re-pair users and queries inside category buffers of k (paper 001 Algorithm 2), durably."""

    NAME = "category_buffer"
    Config = CategoryBufferConfig
    SUMMARY = "k-anonymous re-pairing of users and queries within category buffers (paper 001 Alg. 2), in SQLite"
    BUFFERING = True
    STATEFUL = True
    PRESCAN = True

    def __init__(self, config: CategoryBufferConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.cfg = config
        if ctx.state is None:
            raise ConfigValueError("k", "category_buffer needs the state store (state_dir)")
        self.pool = RandomPool(ctx.token_bytes)
        self.store = HeldStore(ctx.state)
        self.buckets: dict[str, Bucket] = {}
        self.held_pairs: dict[int, int] = {}  # pair hashes of every event with a half still held
        self._recent: set[int] = set()  # two generations of recently seen pairs
        self._older: set[int] = set()
        self._batch_pairs: set[int] = set()
        self._future: set[int] = set()  # pairs the archive holds later (replay --prescan)
        self.codecs: dict[str | None, Any] = {}
        self.user_roles = tuple(r for r in config.user_roles if r != "user")
        #: fast path: only the user id travels with the user, time is the query's or the release time
        self._simple = not self.user_roles and not config.user_fields and config.time != "user"
        self._release_time = config.time == "release"
        self._held = 0
        self._new: list[Held] = []
        self._touched: set[Held] = set()
        self._gone: list[int] = []
        self._dirty_k: set[str] = set()
        self._stream_time: Any = None
        self._next_id = 1
        self._load()

    # --- buckets -------------------------------------------------------------------

    def _bucket(self, name: str) -> Bucket:
        b = self.buckets.get(name)
        if b is None:
            base = self.cfg.k
            if self.cfg.k_per_category and name in self.cfg.k_per_category:
                base = self.cfg.k_per_category[name]
            b = self.buckets[name] = Bucket(name, base)
        return b

    def _bucket_name(self, ev: Event) -> str | None:
        meta = ev.meta
        cat = meta.get("category") if meta else None
        if (not cat or cat == UNKNOWN) and self.cfg.category_field:
            cat = self._record_field(ev, self.cfg.category_field)
        if not cat or cat == UNKNOWN:
            return None if self.cfg.unknown == "drop" else UNKNOWN
        if self.cfg.level > 1 and meta:
            path = meta.get("category_path")
            if path:
                return "/".join(str(p) for p in tuple(path)[: self.cfg.level])
        return str(cat)

    @staticmethod
    def _record_field(ev: Event, name: str) -> Any:
        record = ev.record
        if isinstance(record, dict):
            return record.get(name)
        columns = getattr(ev.codec, "columns", None)
        if isinstance(record, list) and columns and name in columns:
            i = columns.index(name)
            return record[i] if i < len(record) else None
        return None

    def _uvalues(self, ev: Event) -> tuple[Any, ...]:
        if self._simple:
            return (ev.user,)
        values = (ev.user, *(getattr(ev, r) for r in self.user_roles))
        if self.cfg.user_fields:
            values += tuple(self._record_field(ev, f) for f in self.cfg.user_fields)
        if self.cfg.time == "user":
            values += (ev.time,)
        return values

    # --- pair memory ---------------------------------------------------------------

    def _remember(self, pair: int) -> None:
        """Two generations of ``avoid_repeat_pairs / 2`` pairs each: O(1), bounded, at least the last half."""
        recent = self._recent
        recent.add(pair)
        if len(recent) * 2 >= self.cfg.avoid_repeat_pairs:
            self._older = recent
            self._recent = set()

    def _avoided(self, user: str, text: str) -> bool:
        pair = hash((user, text))
        return (pair in self.held_pairs or pair in self._batch_pairs or pair in self._recent or pair in self._older
                or pair in self._future)

    # --- drawing and releasing -----------------------------------------------------

    def _draw(self, bucket: Bucket) -> tuple[int, str, int] | None:
        """A valid (query index, user, slot index), or None when the bucket has no valid pair.

        Valid: the user is not the query's sender and is not known to have sent
        the same text. Query uniform among held queries; user uniform among the
        distinct held users (``user_draw: user``) or weighted by their held
        slots (``slot``, the paper's multiset). Rejection sampling (32 tries),
        then an exact enumeration of the valid pairs, so the pair is uniform
        among valid pairs; a bucket whose users and senders are all one person
        is recognised in one pass.
        """
        by_name = bucket.by_name
        if len(by_name) == 1:
            (only,) = by_name
            if all(q.sender == only for q in bucket.queries):
                return None
        queries = bucket.queries
        below = self.pool.below
        avoided = self._avoided
        by_user = self.cfg.user_draw == "user"
        names = list(by_name)
        weights = None if by_user else [len(by_name[n]) for n in names]
        total = sum(weights) if weights else 0
        nq = len(queries)
        for _ in range(32):
            q = queries[qi := below(nq)]
            name = names[below(len(names))] if by_user else _weighted(names, weights, below(total))  # type: ignore
            if name != q.sender and not avoided(name, q.text):
                return qi, name, below(len(by_name[name]))
        valid = [(qi, name) for qi, q in enumerate(queries) for name in names
                 if name != q.sender and not avoided(name, q.text)]
        if not valid:
            return None
        if by_user:
            qi, name = valid[below(len(valid))]
        else:
            w = [len(by_name[n]) for _, n in valid]
            qi, name = _weighted(valid, w, below(sum(w)))
        return qi, name, below(len(by_name[name]))

    def _gone_half(self, h: Held) -> None:
        """Bookkeeping after one half of ``h`` left its bucket."""
        if h.ubucket is None and h.qbucket is None:
            _dec(self.held_pairs, h.pair)
            if not h.new:
                self._touched.discard(h)
                self._gone.append(h.row)
        elif not h.new:
            self._touched.add(h)

    def _emit(self, q: Held, u: Held) -> Event:
        """The output: a copy of the query's event carrying the drawn user's side."""
        src = q.event
        codec = src.codec if src.codec is not None else self.codecs.get(q.fmt)
        uv = u.uvalues
        if self._simple:
            t = self._stream_time if self._release_time and self._stream_time is not None else src.time
            ev = Event(uv[0], src.query, t, src.rank, src.url, src.record, src.raw, codec, src.eol)
            ev.meta = dict(src.meta) if src.meta else None
            return ev
        ev = Event(uv[0], src.query, src.time, src.rank, src.url, src.record, src.raw, codec, src.eol)
        ev.meta = dict(src.meta) if src.meta else None
        cfg = self.cfg
        n = len(self.user_roles) + 1
        for role, value in zip(self.user_roles, uv[1:n]):
            setattr(ev, role, value)
        if cfg.user_fields:
            self._set_fields(ev, cfg.user_fields, uv[n:n + len(cfg.user_fields)])
        if cfg.time == "release":
            if self._stream_time is not None:
                ev.time = self._stream_time
        elif cfg.time == "user":
            ev.time = uv[-1]
        return ev

    @staticmethod
    def _set_fields(ev: Event, names: tuple[str, ...], values: tuple[Any, ...]) -> None:
        record = ev.record
        if isinstance(record, dict):
            record = dict(record)
            for name, value in zip(names, values):
                if value is None:
                    record.pop(name, None)
                else:
                    record[name] = value
        elif isinstance(record, list):
            columns = getattr(ev.codec, "columns", ())
            record = list(record)
            for name, value in zip(names, values):
                if name in columns:
                    record[columns.index(name)] = "" if value is None else value
        else:
            return
        ev.record = record

    def _release(self, bucket: Bucket, out: list[Event]) -> None:
        """Release while the bucket holds k events of at least ``min_users`` distinct users and a valid
        pair exists; otherwise k <- ceil(k * delta) (paper 001's rule, which is ``min_users: 2``).

        The common case is inlined: one (query, user) draw from the CSPRNG pool,
        accepted when valid; anything else goes through :meth:`_draw`.
        """
        cfg = self.cfg
        min_users = cfg.min_users or bucket.base
        queries, by_name = bucket.queries, bucket.by_name
        emit = self._emit
        gone = self._gone_half
        pool = self.pool
        fast = cfg.user_draw == "user"
        held_pairs, batch_pairs, future = self.held_pairs, self._batch_pairs, self._future
        while len(queries) >= bucket.k:
            drawn: tuple[int, str, int] | None = None
            if len(by_name) >= min_users:
                words, i = pool.words, pool.i
                if fast and i + 3 <= len(words):
                    pool.i = i + 3
                    qi = words[i] % len(queries)
                    q = queries[qi]
                    names = list(by_name)
                    name = names[words[i + 1] % len(names)]
                    if name != q.sender:
                        pair = hash((name, q.text))
                        if (pair not in held_pairs and pair not in batch_pairs and pair not in self._recent
                                and pair not in self._older and pair not in future):
                            drawn = qi, name, words[i + 2] % len(by_name[name])
                if drawn is None:
                    drawn = self._draw(bucket)
            if drawn is None:
                bucket.k = math.ceil(bucket.k * cfg.delta)
                self._dirty_k.add(bucket.name)
                self.counts["k_raised"] += 1
                return
            qi, name, si = drawn
            u = bucket.pop_user(name, si)
            q = bucket.pop_query(qi)
            if u.qbucket is None or not u.new:
                gone(u)
            if q.ubucket is None or not q.new:
                gone(q)
            out.append(emit(q, u))
            self._held -= 1
            if bucket.k > bucket.base and cfg.decay:
                bucket.k = max(bucket.base, min(bucket.k - 1, math.ceil(bucket.k / cfg.delta)))
                self._dirty_k.add(bucket.name)

    # --- removal policies ------------------------------------------------------------

    def _drop_oldest(self, bucket: Bucket, count: int, reason: str) -> None:
        """Suppress the ``count`` oldest held queries of a bucket with as many of its oldest user slots."""
        count = min(count, len(bucket.queries))
        if count <= 0:
            return
        for h in sorted(bucket.queries, key=lambda x: x.arrived)[:count]:
            bucket.pop_query(h.qidx)
            self._gone_half(h)
        for h in sorted(bucket.users(), key=lambda x: x.arrived)[:count]:
            bucket.remove_user(h)
            self._gone_half(h)
        self._held -= count
        self.counts[reason] += count

    def _overflow(self) -> None:
        excess = self._held - self.cfg.max_held
        if excess <= 0:
            return
        largest = max(self.buckets.values(), key=lambda b: len(b.queries))
        self._drop_oldest(largest, max(excess, len(largest.queries) // 100), "suppressed_overflow")
        log.warning("events_suppressed", filter=self.NAME, reason="max_held", held=self._held)

    def _apply_max_hold(self, out: list[Event]) -> None:
        policy = self.cfg.max_hold
        if policy == "hold":
            return
        cutoff = _time.time() - self.cfg.max_hold_seconds
        for bucket in list(self.buckets.values()):
            if not bucket.queries:
                continue
            if policy == "suppress":
                overdue = sum(1 for h in bucket.queries if h.arrived < cutoff)
                if overdue:
                    self._drop_oldest(bucket, overdue, "suppressed_max_hold")
                    log.info("events_suppressed", filter=self.NAME, reason="max_hold", count=overdue)
            elif bucket.name != ROOT and min(h.arrived for h in bucket.queries) < cutoff:
                self._merge(bucket, out)

    @staticmethod
    def _parent(name: str) -> str:
        if name in (UNKNOWN, ROOT) or "/" not in name:
            return ROOT
        return name.rsplit("/", 1)[0]

    def _merge(self, bucket: Bucket, out: list[Event]) -> None:
        """Move every held half of an overdue bucket into its parent bucket, then release from the parent."""
        parent = self._bucket(self._parent(bucket.name))
        moved = len(bucket.queries)
        for h in bucket.queries:
            parent.add_query(h)
            if not h.new:
                self._touched.add(h)
        for h in bucket.users():
            parent.add_user(h)
            if not h.new:
                self._touched.add(h)
        bucket.queries = []
        bucket.by_name = {}
        self.counts["merged"] += moved
        log.info("bucket_merged", filter=self.NAME, count=moved)
        self._release(parent, out)

    # --- durability ---------------------------------------------------------------

    def _load(self) -> None:
        rows, ks = self.store.load()
        self._next_id = (rows[-1][0] + 1) if rows else 1
        for row_id, ubucket, qbucket, arrived, blob in rows:
            ev, fmt = unpack_event(blob, self.ctx.codec_for)
            sender = str(ev.user)
            text = normalise_text(ev.query)
            pair = hash((sender, text))
            h = Held(row_id, ev, sender, text, pair, arrived, fmt, self._uvalues(ev), None, new=False)
            _inc(self.held_pairs, pair)
            if ubucket is not None:
                self._bucket(ubucket).add_user(h)
            if qbucket is not None:
                self._bucket(qbucket).add_query(h)
        for name, k in ks.items():
            b = self._bucket(name)
            b.k = max(k, b.base)
        self._held = sum(len(b.queries) for b in self.buckets.values())
        if rows:
            log.info("buffer_restored", filter=self.NAME, held=self._held, buckets=len(self.buckets))

    def _commit(self) -> None:
        inserts = []
        for h in self._new:
            if h.ubucket is None and h.qbucket is None:
                continue  # arrived and left within the batch: nothing to store
            blob, kept = pack_event(h.event)
            if not kept:
                self.counts["record_not_kept"] += 1
            inserts.append((h.row, h.ubucket, h.qbucket, h.arrived, blob))
            h.new = False
        updates = [(h.ubucket, h.qbucket, h.row) for h in self._touched]
        deletes = [(row,) for row in self._gone]
        ks = [(name, self.buckets[name].k) for name in self._dirty_k]
        if inserts or updates or deletes or ks:
            self.store.write(inserts, updates, deletes, ks)
        self._new = []
        self._touched = set()
        self._gone = []
        self._dirty_k = set()

    # --- the Filter contract ------------------------------------------------------

    def prescan(self, batches: Iterable[list[Event]]) -> None:
        """Learn the archive's (user, text) pairs whose text has more than one sender.

        Only such a pair can be re-created (a user gets another sender's copy of
        a text they send themselves), so only those are kept: in memory, as
        salted 64-bit hashes, until the process ends. The pass itself takes
        16 bytes per event (numpy), freed when it ends.
        """
        texts, pairs = array("q"), array("q")
        for batch in batches:
            for ev in batch:
                text = normalise_text(ev.query)
                texts.append(hash(text))
                pairs.append(hash((str(ev.user), text)))
        self.counts["prescanned"] += len(pairs)
        if not pairs:
            return
        unique_pairs, first = np.unique(np.frombuffer(pairs, dtype=np.int64), return_index=True)
        pair_texts = np.frombuffer(texts, dtype=np.int64)[first]
        values, senders = np.unique(pair_texts, return_counts=True)
        shared = unique_pairs[np.isin(pair_texts, values[senders > 1])]
        self._future.update(shared.tolist())
        self.counts["prescan_shared_pairs"] = len(self._future)

    def process(self, batch: list[Event]) -> list[Event]:
        out: list[Event] = []
        now = _time.time()
        next_id = self._next_id
        dropped = 0
        buckets = self.buckets
        codecs = self.codecs
        held_pairs = self.held_pairs
        new_append = self._new.append
        cap = self.cfg.avoid_repeat_pairs
        slow_names = self.cfg.level > 1 or self.cfg.category_field is not None or self.cfg.unknown == "drop"
        bucket_name = self._bucket_name
        uvalues = self._uvalues
        simple = self._simple
        release = self._release
        keys = []
        for ev in batch:
            sender = str(ev.user)
            text = " ".join(str(ev.query).casefold().split())
            keys.append((sender, text, hash((sender, text))))
        # look-ahead: a pair that occurs later in this batch is not created either
        self._batch_pairs = {key[2] for key in keys}
        recent = self._recent
        last_codec: Any = None
        fmt = None
        for ev, (sender, text, pair) in zip(batch, keys):
            if slow_names:
                name = bucket_name(ev)
                if name is None:
                    dropped += 1
                    continue
            else:
                meta = ev.meta
                name = meta.get("category") if meta else None
                if not name:
                    name = UNKNOWN
            self._stream_time = ev.time
            codec = ev.codec
            if codec is not last_codec:
                last_codec = codec
                fmt = getattr(codec, "format", None) if codec is not None else None
                if codec is not None and fmt not in codecs:
                    codecs[fmt] = codec
            h = Held(next_id, ev, sender, text, pair, now, fmt, (ev.user,) if simple else uvalues(ev), name, True)
            next_id += 1
            bucket = buckets.get(name) or self._bucket(name)
            by_name, queries = bucket.by_name, bucket.queries
            slots = by_name.get(sender)
            if slots is None:
                by_name[sender] = [h]
            else:
                slots.append(h)
            h.qidx = len(queries)
            queries.append(h)
            new_append(h)
            held_pairs[pair] = held_pairs.get(pair, 0) + 1
            if cap:
                recent.add(pair)
                if len(recent) * 2 >= cap:
                    self._older = recent
                    recent = self._recent = set()
            if len(queries) >= bucket.k:
                release(bucket, out)
        self._next_id = next_id
        arrived = len(batch) - dropped
        self._held += arrived
        if dropped:
            self.counts["dropped_unknown"] += dropped
        self.counts["arrived"] += arrived
        self._batch_pairs = set()
        if self._held > self.cfg.max_held:
            self._overflow()
        self._apply_max_hold(out)
        self._commit()  # one transaction: this batch's arrivals, releases and k changes
        self.counts["released"] += len(out)
        return out

    def flush(self, final: bool) -> list[Event]:
        """Apply the max_hold policy (not on final: shutdown leaves held events held)."""
        if final:
            return []
        out: list[Event] = []
        self._batch_pairs = set()
        self._apply_max_hold(out)
        self._commit()
        self.counts["released"] += len(out)
        return out

    def held(self) -> int:
        return self._held

    def held_users(self) -> Counter[tuple[str, str]]:
        """Held user halves by (user, bucket): what each user is still owed (for the profile invariant)."""
        out: Counter[tuple[str, str]] = Counter()
        for b in self.buckets.values():
            for name, slots in b.by_name.items():
                out[(name, b.name)] += len(slots)
        return out

    def stats(self) -> dict[str, Any]:
        return {
            "held_per_category": {b.name: len(b.queries) for b in self.buckets.values() if b.queries},
            "k_per_category": {b.name: b.k for b in self.buckets.values()},
        }
