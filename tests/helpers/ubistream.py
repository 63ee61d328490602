"""A generated stream of UBI query and event records (the tests' own data; fixtures/ is the independent one).

Users search (query records) and click or add to cart (event records pointing to the query by ``query_id``).
Events arrive after their query by a few records, some before it (a frontend that flushes clicks first), some
point to a query that never arrives (``query_unknown``); some queries are empty (the k-anonymity chain drops
them) and some carry an e-mail address (scrubbed). Deterministic for a seed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

TOPICS = (
    "cheap flights to boston",
    "weather tomorrow",
    "pizza dough recipe",
    "used cars for sale",
    "nba scores",
    "mortgage rates",
    "running shoes",
    "python tutorial",
    "flu symptoms",
    "hotel deals paris",
    "guitar lessons",
    "tax forms",
    "dog training tips",
    "laptop reviews",
    "movie times",
    "garden tools",
)
ACTIONS = ("click", "click", "click", "add_to_cart")


@dataclass
class UbiStream:
    """The lines, and the truth: each query id's original client, time and text, the empty queries."""

    lines: list[str] = field(default_factory=list)
    query_client: dict[str, str] = field(default_factory=dict)
    query_time: dict[str, str] = field(default_factory=dict)
    query_text: dict[str, str] = field(default_factory=dict)
    empty_queries: set[str] = field(default_factory=set)
    unknown_events: int = 0


def _ts(second: int) -> str:
    return f"2024-05-01T{10 + second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}.000Z"


def ubi_stream(
    seed: int,
    *,
    users: int = 40,
    queries: int = 400,
    max_events: int = 3,
    early: float = 0.1,
    unknown: float = 0.02,
    empty: float = 0.04,
    email: float = 0.03,
) -> UbiStream:
    """``queries`` query records of ``users`` clients, each followed by 0..``max_events`` events; see the
    module doc for the shares."""
    rng = random.Random(seed)
    out = UbiStream()
    slots: list[tuple[float, str]] = []  # (position, line): events are placed around their query's position
    for n in range(queries):
        client = f"client-{rng.randrange(users):04d}"
        qid = f"q-{seed}-{n:06d}"
        text = rng.choice(TOPICS)
        if rng.random() < empty:
            text = ""
            out.empty_queries.add(qid)
        elif rng.random() < email:
            text = f"{text} mail {client}@example.com"
        out.query_client[qid] = client
        out.query_time[qid] = _ts(n)
        out.query_text[qid] = text
        query = {
            "application": "gen",
            "query_id": qid,
            "client_id": client,
            "user_query": text,
            "timestamp": _ts(n),
            "query_attributes": {},
            "query_response_id": f"r-{qid}",
            "query_response_hit_ids": [f"sku-{rng.randrange(1000)}" for _ in range(3)],
        }
        slots.append((n, json.dumps(query, separators=(",", ":"))))
        for e in range(rng.randrange(max_events + 1)):
            ordinal = rng.randrange(1, 4)
            event = {
                "application": "gen",
                "action_name": rng.choice(ACTIONS),
                "query_id": qid,
                "client_id": client,
                "session_id": f"s-{client}",
                "timestamp": _ts(n + e + 1),
                "message_type": "INFO",
                "message": "",
                "event_attributes": {
                    "object": {"object_id": f"sku-{rng.randrange(1000)}", "description": f"item for {text}"},
                    "position": {"ordinal": ordinal},
                },
            }
            at = n - 0.5 if rng.random() < early else n + rng.uniform(0.1, 5.0)
            slots.append((at, json.dumps(event, separators=(",", ":"))))
        if rng.random() < unknown:
            event = {"action_name": "click", "query_id": f"missing-{seed}-{n}", "client_id": client}
            slots.append((n + 0.3, json.dumps(event, separators=(",", ":"))))
            out.unknown_events += 1
    slots.sort(key=lambda s: s[0])
    out.lines = [line for _, line in slots]
    return out
