"""Held events in the state store: the compact row of a TSV event gives back the event it was."""

from __future__ import annotations

from pathlib import Path

import msgpack
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from filters.category_buffer.store import EventPacker, at_rest, pack_event, unpack_event
from sidecar.api import SchemaConfig
from sidecar.cli import main
from sidecar.codecs import TsvCodec
from sidecar.records import LINE_BREAKS
from sidecar.tools.generate.synthetic import generate_log

CODEC = TsvCodec(SchemaConfig(format="tsv", header=False))
#: TSV field text: no tab and no line-breaking code point (a TSV record holding one is dead-lettered)
TEXT = st.text(
    alphabet=st.characters(blacklist_characters="\t" + LINE_BREAKS, blacklist_categories=("Cs",)), max_size=12
)


def fields(ev: object) -> tuple[object, ...]:
    return tuple(getattr(ev, a) for a in ("user", "query", "time", "rank", "url", "record", "raw", "eol"))


@given(cols=st.lists(TEXT, min_size=5, max_size=5), cr=st.booleans(), scrubbed=st.none() | TEXT)
def test_compact_row_round_trip(cols: list[str], cr: bool, scrubbed: str | None) -> None:
    """Roles (one changed by a filter, e.g. a scrubbed query), fields, raw line (with a CR) and annotations
    come back equal, and the row is smaller than the same values written out in full."""
    line = "\t".join(cols) + ("\r" if cr else "")
    ev = CODEC.decode_many([line], "\n", [])[0]
    if scrubbed is not None:
        ev.query = scrubbed
    ev.annotate("category", "Arts")
    ev.annotate("category_path", ("Arts", "Music"))
    packer = EventPacker()
    blob, kept = packer.pack(ev)
    back, fmt = unpack_event(blob)
    assert kept and fmt == "tsv"
    if scrubbed is None:
        assert fields(back) == fields(ev)
    else:  # held as it will be written: the original query is in neither the record nor the raw line
        assert fields(back)[:5] == fields(ev)[:5] and back.eol == ev.eol
        expected = [*cols[:1], scrubbed, *cols[2:]]
        assert back.record == expected
        assert back.raw == "\t".join(expected) + ("\r" if cr else "")
    assert back.meta == {"category": "Arts", "category_path": ("Arts", "Music")}
    held = at_rest(ev)  # the values the row keeps: a changed event as it will be written
    full = msgpack.packb(
        [held.user, held.query, held.time, held.rank, held.url, held.record, held.raw, held.eol, fmt, dict(ev.meta)]
    )
    assert len(blob) <= len(full) + 6  # at most the five field indices more (a row of empty fields)
    if not cr and sum(map(len, cols)) > 5:  # the raw line is not written again
        assert len(blob) < len(full)


def test_rows_written_before_still_load() -> None:
    """A row of the earlier layout (ten items, roles and raw written out) is read as it was written."""
    old = msgpack.packb(
        [
            "u1",
            "scrubbed",
            "t",
            "1",
            "http://x",
            ["u1", "q", "t", "1", "http://x"],
            "u1\tq",
            "\n",
            "tsv",
            {"category": "Arts"},
        ]
    )
    ev, fmt = unpack_event(old)
    assert (ev.user, ev.query, ev.raw, fmt, ev.meta["category"]) == ("u1", "scrubbed", "u1\tq", "tsv", "Arts")


def test_one_packer_learns_the_columns_and_survives_other_layouts() -> None:
    """A packer reused across events of different column layouts still writes each one right."""
    packer = EventPacker()
    a = CODEC.decode_many(["u\tq\tt\tr\tl"], "\n", [])[0]
    b = CODEC.decode_many(["u2\tq2\tt2\tr2\tl2"], "\n", [])[0]
    b.user, b.url = b.url, b.user  # roles now in other fields than the packer last saw
    for ev in (a, b, a):
        back, _ = unpack_event(packer.pack(ev)[0])
        assert fields(back)[:5] == fields(ev)[:5]
        if ev is a:
            assert fields(back) == fields(ev)
        else:  # b's roles moved: it is held as it will be written, each role in its own column
            assert back.record == ["l2", "q2", "t2", "r2", "u2"] and back.raw == "l2\tq2\tt2\tr2\tu2"
    assert fields(unpack_event(pack_event(a)[0])[0]) == fields(a)


def test_a_scrubbed_identifier_is_not_held_at_rest(tmp_path: Path) -> None:
    """hipaa_scrub -> category_buffer: the state database (and its WAL) never holds a removed identifier, while
    the buffer holds events; before, the held row kept the original record and raw line."""
    log = tmp_path / "in.tsv"
    with log.open("w", encoding="utf-8") as out:
        stats = generate_log(150, 11, out)
    config = tmp_path / "c.yaml"
    config.write_text(
        "state_dir: state\nschema: {format: tsv, header: true}\nfilters:\n"
        "  - hipaa_scrub: {emptied: keep}\n  - category_buffer: {k: 50, max_hold: hold}\n",
        encoding="utf-8",
    )
    res = CliRunner().invoke(main, ["replay", "--config", str(config), str(log), "-o", str(tmp_path / "out.tsv")])
    assert res.exit_code == 0, res.output
    released = (tmp_path / "out.tsv").read_bytes()
    held = b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())
    assert b"held" in held or len(held) > 100_000  # events are held: the buffer's k exceeds what it can release
    removed = [p.value.encode() for p in stats.planted if len(p.value) >= 6 and p.value.encode() not in released]
    assert len(removed) >= 4
    assert [v for v in removed if v in held] == []
