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
  are drawn from the bucket with the CSPRNG (:func:`.pairs.draw`) and the
  pair is kept only when valid — the user is neither the query's sender nor
  a user known to have sent the same text (same words, case-folded) among
  buffered events, the last
  ``avoid_repeat_pairs`` events and the rest of the current batch. So the
  log matcher finds no protected (user, query) identical to an original one,
  except when that user sends that text only later (a streaming filter cannot
  know the future beyond its batch; popular queries make this happen).
  When an archive is replayed with ``replay --prescan``, the future is known:
  a first pass (:meth:`.filter.CategoryBufferFilter.prescan`) collects every pair whose
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
* **Durable**: every held event is a row in the SQLite state store. In ``serve``
  a batch's arrivals, releases and k changes commit in one transaction, so a
  restart or kill -9 resumes with exactly what was held after the last completed
  batch; ``replay --resume`` commits them every 50 batches with the input
  position and the output's size (a crash redoes at most the last group from
  the input: docs/GUARANTEES.md).
* **Bounded**: memory is O(events held), and k never passes ``max_k`` (default
  64 x the base k): a bucket at ``max_k`` that still cannot release suppresses
  the excess of whoever holds the most in it (``max_k_policy: suppress``,
  counted) or keeps holding (``hold``), so at most about the sum of ``max_k``
  over the buckets is held, and never more than ``max_held`` events (the
  oldest of the largest bucket is then suppressed and counted). The number of
  users does not matter. What the bound costs in privacy and utility:
  ``README.md`` beside this file.
* **Events without a category** go to their own ``unknown`` bucket (or are
  dropped and counted with ``unknown: drop``, as the paper discarded them).
* **Empty queries** (``""`` or only spaces, e.g. emptied by ``hipaa_scrub``
  with ``emptied: keep``) never pass through as they came: ``classify`` gives
  them no category, so they are held in the ``unknown`` bucket and re-paired
  like any uncategorised query (their text is the same, so a user known to
  have sent an empty query is never given one), or dropped with
  ``unknown: drop``. A released one carries no content, but it still says that
  the drawn user searched at the release time and carries its query-side
  fields (rank, clicked URL): a chain that wants none of that drops them
  before this filter (``hipaa_scrub`` ``emptied: drop``, as
  ``config/k-anonymity.yaml`` does).

The released event is the query's own event (its record, so output keeps the
input schema and all query-side fields) with the user-side roles and fields of
the drawn user; its annotations are the query's (so ``profile`` counts the
query's category for the new user, exactly as the paper's profiler does).

Modules: :mod:`.filter` (the :class:`~sidecar.api.Filter`), :mod:`.buckets`
(the per-category user and query sets, k and delta), :mod:`.pairs` (pair
safety and drawing a valid pair), :mod:`.sides` (what travels with the user,
the released event), :mod:`.store` (held events in SQLite), :mod:`.rand`
(CSPRNG indices), :mod:`.config` (every option).
"""

from filters.category_buffer.config import CategoryBufferConfig
from filters.category_buffer.filter import CategoryBufferFilter

__all__ = ["CategoryBufferConfig", "CategoryBufferFilter"]
