"""User fields (non-role record fields that travel with the user) in every record format."""

from __future__ import annotations

import json
import random
from pathlib import Path

from adapters.grpc.codec import ProtoCodec, QueryEvent
from filters.category_buffer import CategoryBufferConfig, CategoryBufferFilter
from sidecar.api import BuildContext, Event
from sidecar.codecs import JsonlCodec, RolesConfig, SchemaConfig
from sidecar.pipeline import codec_lookup
from sidecar.state import StateStore


def _filter(tmp: Path, seed: int = 3, **options: object) -> CategoryBufferFilter:
    ctx = BuildContext(
        config_dir=tmp, state=StateStore(tmp), rng=random.Random(seed), seed=seed, codecs=codec_lookup(SchemaConfig())
    )
    return CategoryBufferFilter(CategoryBufferConfig(**options), ctx)  # options typed loosely


def test_user_fields_travel_with_the_user_over_grpc(tmp_path: Path) -> None:
    """A gRPC attribute configured as a user field (`ip`) is the drawn user's in the released message,
    while a query-side attribute (`session`) stays the query's: the proto codec reads and writes attributes."""
    codec = ProtoCodec()
    msgs = [
        QueryEvent(user=f"u{i}", query=f"query {i}", seq=i, attributes={"ip": f"10.0.0.{i}", "session": f"s{i}"})
        for i in range(3)
    ]
    events: list[Event] = list(codec.decode_batch(msgs))
    for e in events:
        e.annotate("category", "Sports")
    f = _filter(tmp_path, k=3, user_fields=("ip",), time="query")
    (o,) = f.process(events)
    m = codec.encode(o)
    i_user, i_query = int(m.user[1:]), int(m.query.split()[1])
    assert i_user != i_query
    assert m.attributes["ip"] == f"10.0.0.{i_user}"
    assert m.attributes["session"] == f"s{i_query}"
    assert f.counts["user_field_not_set"] == 0


def test_a_user_field_the_drawn_user_lacks_is_absent_from_the_output(tmp_path: Path) -> None:
    """JSON: when the drawn user's record has no `ip`, the released record has no `ip` key either (never the
    query sender's `ip`, and not a null the input never had)."""
    codec = JsonlCodec(SchemaConfig(roles=RolesConfig(user="uid", query="q", time=None, rank=None, url=None)))
    lines = [json.dumps({"uid": "u0", "q": "query 0", "ip": "10.0.0.0"})]
    lines += [json.dumps({"uid": f"u{i}", "q": f"query {i}"}) for i in (1, 2)]
    removed = 0
    for seed in range(1, 9):
        events = [codec.decode(line, "\n") for line in lines]
        for e in events:
            e.annotate("category", "Arts")
        f = _filter(tmp_path / str(seed), seed, k=3, user_fields=("ip",), time="query")
        (o,) = f.process(events)
        rec = json.loads(codec.encode(o))
        if rec["uid"] == "u0":
            assert rec["ip"] == "10.0.0.0"
        else:
            assert "ip" not in rec
            removed += 1
    assert removed  # the seeds exercise the case


def test_user_fields_of_restored_events_are_kept_after_a_restart(tmp_path: Path) -> None:
    """TSV: events held by a first run and restored from SQLite still carry their user's `ip` column when the
    second run releases them (issue 11, defect 5: they came out empty)."""
    from sidecar.codecs import TsvCodec

    header = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\tip"

    def decode(rows: list[tuple[int, str]]) -> list[Event]:
        codec = TsvCodec(SchemaConfig())
        codec.accept_header(header)
        lines = [f"{u}\t{q}\t2006-03-01 10:00:00\t\t\t10.0.0.{u}" for u, q in rows]
        events = codec.decode_many(lines, "\n", [])
        for e in events:
            e.annotate("category", "Arts")
        return events

    first = _filter(tmp_path, k=4, user_fields=("ip",), time="query")
    assert first.process(decode([(1, "a"), (2, "b"), (3, "c")])) == []
    first.close()
    assert first.ctx.state is not None
    first.ctx.state.close()  # the concrete StateStore has close()
    second = _filter(tmp_path, k=4, user_fields=("ip",), time="query")
    out = second.process(decode([(4, "d")]))
    assert out, "the fourth event fills the bucket"
    for ev in out:
        assert ev.codec is not None
        fields = ev.codec.encode(ev).split("\t")
        assert fields[5] == f"10.0.0.{fields[0]}"
