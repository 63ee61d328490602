"""Pipeline statistics as a ``StatsResponse`` and back (counts and names only)."""

from __future__ import annotations

import json
from typing import Any

from adapters.grpc.stubs.querylog.v1.querylog_pb2 import StatsResponse

_FILTER_KEYS = {"name", "events_in", "events_out", "held", "counts"}


def stats_message(s: dict[str, Any]) -> StatsResponse:
    """Pipeline.stats() as a StatsResponse (filter extras in a Struct)."""
    resp = StatsResponse(
        events_in=max(0, s["events_in"]),
        events_out=max(0, s["events_out"]),
        events_held=max(0, s["events_held"]),
        events_dropped=max(0, s["events_dropped"]),
        events_dead_lettered=s["events_dead_lettered"],
        dead_letters=s["dead_letters"],
        uptime_seconds=float(s.get("uptime_seconds", 0.0)),
        rpcs_refused={str(k): int(v) for k, v in s.get("rpcs_refused", {}).items()},
    )
    for f in s["filters"]:
        fs = resp.filters.add(
            name=f["name"],
            events_in=max(0, f["events_in"]),
            events_out=max(0, f["events_out"]),
            held=max(0, f["held"]),
            counts={str(k): int(v) for k, v in f["counts"].items()},
        )
        extra = {k: v for k, v in f.items() if k not in _FILTER_KEYS}
        if extra:
            fs.extra.update(json.loads(json.dumps(extra, default=str)))
    return resp
