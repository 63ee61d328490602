"""The live audit ``serve`` keeps of what it releases (issue 22 item 8), exported on /metrics.

The runtime calls :meth:`LiveAudit.incoming` with a batch's events *before* the chain (so it sees the input user
and query, which filters change in place) and :meth:`LiveAudit.outgoing` with what the chain released. Nothing
kept is a text or an id: users and queries are remembered as 8-byte keyed hashes (BLAKE2b in its keyed MAC mode,
RFC 7693, with a 32-byte key from ``secrets`` drawn per process: the same role as an HMAC, at half its cost), so
the hashes cannot be reversed by hashing a dictionary, and they mean nothing after a restart.

* **Re-created pairs.** Each audited input (user, query) pair enters a sliding window (``window_pairs`` pairs,
  ``window_seconds`` seconds, whichever is smaller); each audited released event whose (user, query) is in it is
  counted: released as the same user sent it. A passthrough chain counts every audited event; a k-anonymity chain
  none; a chain that keeps the query but replaces the user does not count here (the linkage estimate does).
* **Identifiers in and out.** A filter's identifier detector (``live_audit.detector``: ``hipaa_scrub``'s Safe
  Harbor detectors, reached through the contract's :meth:`~sidecar.api.Filter.identifier_detector` and the plugin
  registry, so the runtime imports no filter) scans at most ``scan_per_second`` queries a second on each side.
* **Linkage.** :mod:`sidecar.linkage`: a reservoir of users and the released ids their queries come out under.

**Bounded CPU.** Whole batches are audited (their input, and their output when the chain releases in the same
call) while a token bucket of CPU seconds has credit: it fills with ``cpu_share`` of the CPU time the process
spends (``time.process_time``: every thread of the sidecar), up to 10 ms, and each audit takes its own CPU time
(``time.thread_time``), so the audit costs at most that share of the sidecar's CPU, loaded or not; other
batches cost a read of the monotonic clock (the process's CPU time, a 2 us system call, is read only once the
process can have refilled the bucket). Released events of other batches (a buffering filter's) are audited on the same
bucket. So every figure is over a sample of batches: a re-created pair is counted when its input and its release
were both audited (a lower bound; ``events{side}`` says how much was audited).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sidecar.api import Event
from sidecar.config.live_audit import LiveAuditConfig
from sidecar.linkage import Linkage, LinkageEstimate

Detector = Callable[[str], Mapping[str, int]]
_MASK = (1 << 64) - 1
_MIX = 0x9E3779B97F4A7C15  # an odd 64-bit constant: (user, query) -> one pair hash
#: CPU seconds of credit the bucket holds at most: a burst of audited batches after an idle spell
BURST_SECONDS = 0.01
#: Cores the process may run on: the fastest its CPU time can grow
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class LiveAudit:
    """The running audit of one pipeline. Not thread-safe: the runtime calls it under its lock."""

    def __init__(
        self,
        config: LiveAuditConfig,
        detector: Detector | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        process_clock: Callable[[], float] = time.process_time,
        cpu_clock: Callable[[], float] = time.thread_time,
        randbelow: Callable[[int], int] = secrets.randbelow,
    ) -> None:
        self.config = config
        self.detector = detector
        self._key = secrets.token_bytes(32)
        self._clock, self._cpu, self._process = clock, cpu_clock, process_clock
        self.window: dict[int, float] = {}  # pair hash -> when it came in, oldest first
        self.linkage = Linkage(
            config.reservoir_users,
            config.queries_per_user,
            config.candidates_per_user,
            config.min_overlap,
            config.seen_users_bits,
            randbelow,
        )
        self.recreated = 0
        self.events = {"in": 0, "out": 0}
        self.batches = {"in": 0, "out": 0}
        self.scanned = {"in": 0, "out": 0}
        self.identifiers: dict[str, dict[str, int]] = {"in": {}, "out": {}}
        self.seconds = 0.0
        self._credit, self._last = BURST_SECONDS, process_clock()
        self._not_before = 0.0
        now = clock()
        self._scan_credit = {"in": config.scan_per_second, "out": config.scan_per_second}
        self._scan_last = {"in": now, "out": now}
        self._estimate = LinkageEstimate(0, 0, 0)
        self._refreshed: float | None = None

    # ---- the budget -----------------------------------------------------------------------------------------
    def _allow(self) -> bool:
        """Whether the CPU bucket has credit for one more audited batch."""
        share = self.config.cpu_share
        if share >= 1:
            return True
        if self._credit <= 0 and self._clock() < self._not_before:
            return False  # the process cannot have spent enough CPU yet: no clock read of its CPU time (2 us)
        now = self._process()
        self._credit = min(BURST_SECONDS, self._credit + (now - self._last) * share)
        self._last = now
        if self._credit > 0:
            return True
        self._wait()
        return False

    def _wait(self) -> None:
        """After an overdrawn bucket: the earliest time the process, on every core, can have refilled it."""
        self._not_before = self._clock() + -self._credit / (self.config.cpu_share * CORES)

    def _scans(self, side: str, wanted: int) -> int:
        """How many of ``wanted`` texts the detector may scan now on ``side`` (its own rate bucket)."""
        if self.detector is None:
            return 0
        rate = self.config.scan_per_second
        now = self._clock()
        credit = min(rate, self._scan_credit[side] + (now - self._scan_last[side]) * rate)
        self._scan_last[side] = now
        n = min(wanted, int(credit))
        self._scan_credit[side] = credit - n
        return n

    # ---- hashing --------------------------------------------------------------------------------------------
    def _hash(self, tag: bytes, value: Any) -> int:
        data = tag + str(value).encode("utf-8", "surrogatepass")
        return int.from_bytes(hashlib.blake2b(data, digest_size=8, key=self._key).digest())

    # ---- the hooks ------------------------------------------------------------------------------------------
    def incoming(self, events: Sequence[Event]) -> bool:
        """Audit a batch's input (before the chain) when the CPU share allows; True when it did: the caller then
        audits what the chain releases from that call with ``outgoing(out, True)``."""
        if not events or not self._allow():
            return False
        t0 = self._cpu()
        now = self._clock()
        h, window, sent = self._hash, self.window, self.linkage.sent
        for ev in events:
            user, query = h(b"u", ev.user), h(b"q", ev.query)
            pair = (user * _MIX + query) & _MASK
            window.pop(pair, None)
            window[pair] = now
            sent(user, query)
        self._expire(now)
        self._scan("in", events)
        self.events["in"] += len(events)
        self.batches["in"] += 1
        self._spent(t0)
        return True

    def outgoing(self, events: Sequence[Event], audited_input: bool = False) -> None:
        """Audit released events: always after an audited ``incoming`` of the same call, else when the share
        allows (a buffering filter's releases)."""
        if not events or not (audited_input or self._allow()):
            return
        t0 = self._cpu()
        h, window, released = self._hash, self.window, self.linkage.released
        recreated = 0
        for ev in events:
            user, query = h(b"u", ev.user), h(b"q", ev.query)
            if (user * _MIX + query) & _MASK in window:
                recreated += 1
            released(user, query)
        self.recreated += recreated
        self._scan("out", events)
        self.events["out"] += len(events)
        self.batches["out"] += 1
        self._spent(t0)

    def _spent(self, t0: float) -> None:
        took = self._cpu() - t0
        self.seconds += took
        self._credit -= took
        if self._credit <= 0 and self.config.cpu_share < 1:
            self._wait()

    def _expire(self, now: float) -> None:
        """Forget pairs beyond ``window_pairs`` or older than ``window_seconds`` (oldest first)."""
        window, limit = self.window, self.config.window_pairs
        oldest = now - self.config.window_seconds
        while window:
            first = next(iter(window))
            if len(window) <= limit and window[first] >= oldest:
                break
            del window[first]

    def _scan(self, side: str, events: Sequence[Event]) -> None:
        """Run the detector on the first queries of the batch its rate allows; count what it finds by type."""
        n = self._scans(side, len(events))
        if not n or self.detector is None:
            return
        found = self.identifiers[side]
        for ev in events[:n]:
            if isinstance(ev.query, str) and ev.query:
                for kind, count in self.detector(ev.query).items():
                    found[kind] = found.get(kind, 0) + count
        self.scanned[side] += n

    # ---- reading --------------------------------------------------------------------------------------------
    def estimate(self) -> LinkageEstimate:
        """The linkage estimate, recomputed when older than ``refresh_seconds``."""
        now = self._clock()
        if self._refreshed is None or now - self._refreshed >= self.config.refresh_seconds:
            t0 = self._cpu()
            self._estimate = self.linkage.estimate()
            self._refreshed = now
            self.seconds += self._cpu() - t0
        return self._estimate

    def stats(self) -> dict[str, Any]:
        """Counts for /metrics (never a text, an id or a hash)."""
        est = self.estimate()
        return {
            "events": dict(self.events),
            "batches": dict(self.batches),
            "recreated_pairs": self.recreated,
            "window_pairs": len(self.window),
            "scanned": dict(self.scanned),
            "identifiers": {side: dict(found) for side, found in self.identifiers.items()},
            "linkage": {
                "sampled": est.sampled,
                "assessed": est.assessed,
                "linked": est.linked,
                "share": est.share,
                "users_seen": self.linkage.users_seen,
            },
            "k": self.config.k,
            "seconds": self.seconds,
        }


class NoAudit:
    """The runtime's audit when none runs (``replay``, ``check-config``, ``live_audit`` off): does nothing."""

    def incoming(self, events: Sequence[Event]) -> bool:
        return False

    def outgoing(self, events: Sequence[Event], audited_input: bool = False) -> None:
        return None

    def stats(self) -> dict[str, Any]:
        return {}


def build_live_audit(config: LiveAuditConfig, metrics_listen: str | None) -> LiveAudit | NoAudit:
    """The audit ``serve`` runs for ``config`` (:class:`NoAudit` when off: ``enabled: off``, or ``auto`` without
    ``metrics_listen``), with the detector of the filter ``detector`` names (checked by the config loader)."""
    if config.enabled == "off" or (config.enabled == "auto" and metrics_listen is None):
        return NoAudit()
    detector = None
    if config.detector is not None:
        from sidecar.registry import FILTERS, plugins

        detector = plugins(FILTERS)[config.detector].identifier_detector()
    return LiveAudit(config, detector)
