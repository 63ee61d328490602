"""UBI records built from a real query log with clicks (the AOL excerpt in /work/shared/data): data the join was not
written from, for its measurements on real users' queries and click patterns.

An AOL line is a query (``AnonID``, ``Query``, ``QueryTime``) and, when ``ClickURL`` is set, one click on its
result at ``ItemRank``; consecutive lines of the same user, query and time are one search with several clicks.
Each search becomes a UBI query record (``query_id`` numbered, ``client_id`` the AnonID, ``user_query``,
``timestamp``), each click an event record (``action_name: click``, the clicked URL as
``event_attributes.object.object_id``, the rank as ``position.ordinal``) after its query. AOL has no click time:
a click takes its query's time. Nothing of the file is kept or printed: counts only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from helpers import SHARED_DATA

AOL = SHARED_DATA / "aol-sample.tsv"


@dataclass
class AolUbi:
    """The lines, and each query id's original client."""

    lines: list[str] = field(default_factory=list)
    query_client: dict[str, str] = field(default_factory=dict)
    clicks: int = 0


def _dumps(record: dict[str, object]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def aol_ubi(path: Path = AOL, limit: int | None = None) -> AolUbi:
    """The UBI stream of the log at ``path`` (its first ``limit`` lines)."""
    out = AolUbi()
    last: tuple[str, str, str] | None = None
    qid = ""
    with path.open(encoding="utf-8", errors="replace") as lines:
        next(lines)  # the header
        for n, line in enumerate(lines):
            if limit is not None and n >= limit:
                break
            cols = line.rstrip("\n").split("\t")
            if len(cols) < 3:
                continue
            user, query, time = cols[0], cols[1], cols[2]
            rank = cols[3] if len(cols) > 3 else ""
            url = cols[4] if len(cols) > 4 else ""
            if (user, query, time) != last:
                last = (user, query, time)
                qid = f"aol-{n:07d}"
                out.query_client[qid] = user
                query_record = {"query_id": qid, "client_id": user, "user_query": query, "timestamp": time}
                out.lines.append(_dumps(query_record))
            if url:
                event = {
                    "action_name": "click",
                    "query_id": qid,
                    "client_id": user,
                    "timestamp": time,
                    "event_attributes": {
                        "object": {"object_id": url, "object_id_field": "url"},
                        "position": {"ordinal": int(rank) if rank.isdigit() else None},
                    },
                }
                out.lines.append(_dumps(event))
                out.clicks += 1
    return out
