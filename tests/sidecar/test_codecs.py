"""Records <-> events: TSV and JSON lines round trips through replay (property tests).

A passthrough chain reproduces its input byte for byte (header, column or key
order, empty fields, empty or blank queries, unicode, CRLF lines, a missing final
newline); a chain that
changes role values writes them back into the same record, keeping every other
column or key, its order and its type.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import TEST_KEY, TEST_KEY_ENV
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filters.truncate_url import truncate
from sidecar.api import BadRecord
from sidecar.codecs import AOL_COLUMNS, LINE_BREAKS, JsonlCodec, SchemaConfig, TsvCodec, carried_fields
from sidecar.config import load_config
from sidecar.deadletter import DeadLetters
from sidecar.drive import ReplaySummary, replay

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PSEUDO_TRUNC = f"filters:\n  - pseudonymize: {{key_env: {TEST_KEY_ENV}}}\n  - truncate_url: {{}}\n"


def run_replay(data: bytes, suffix: str, body: str = "filters: []\n") -> tuple[bytes, ReplaySummary]:
    """Replay ``data`` (a file named in*suffix*) through a config; returns the output bytes and the summary."""
    os.environ[TEST_KEY_ENV] = TEST_KEY
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "c.yaml"
        cfg.write_text(f"state_dir: state\ndead_letter_file: null\n{body}", encoding="utf-8")
        src, out = Path(tmp) / f"in{suffix}", Path(tmp) / f"out{suffix}"
        src.write_bytes(data)
        summary = replay(load_config(cfg), str(src), str(out))
        return out.read_bytes(), summary


def pseudonym(user: object) -> str:
    """What pseudonymize writes: the keyed HMAC, except for an empty or blank id, which stays as it is."""
    if isinstance(user, str) and not user.strip():
        return user
    return hmac.new(TEST_KEY.encode(), str(user).encode(), hashlib.sha256).hexdigest()[:16]


# --- strategies --------------------------------------------------------------------------------

#: ordinary input: no code point that breaks a line (those are framing errors, tested apart below)
_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\t" + LINE_BREAKS)
_json_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters=LINE_BREAKS)
field_text = st.text(_chars, max_size=12)
# an empty or blank query is a valid record (issue 11, defect 13): drawn often, not only by chance
query_text = st.one_of(
    st.just(""), st.text(" \u00a0\u3000\u2000", min_size=1, max_size=3), st.text(_chars, max_size=24)
)
rank_text = st.one_of(st.just(""), st.integers(1, 500).map(str))
url_text = st.one_of(
    st.just(""),
    field_text,
    st.builds(lambda h, p: f"http://www.{h}.com/{p}", st.text("abcxyz", min_size=1, max_size=6), field_text),
)
eols = st.sampled_from(["\n", "\r\n"])


@st.composite
def tsv_logs(draw: st.DrawFn) -> tuple[list[str], list[dict[str, str]], list[str], str]:
    """(columns, rows by column, line endings, text): AOL columns in any order plus extra columns."""
    extra = draw(st.lists(st.sampled_from(["Extra", "Session", "Ünïcode"]), unique=True, max_size=2))
    columns = draw(st.permutations([*AOL_COLUMNS, *extra]))
    n = draw(st.integers(0, 12))
    rows = []
    for _ in range(n):
        row = {c: draw(field_text) for c in columns}
        row["Query"] = draw(query_text)
        row["ItemRank"] = draw(rank_text)
        row["ClickURL"] = draw(url_text)
        rows.append(row)
    endings = [draw(eols) for _ in range(n + 1)]
    if draw(st.booleans()):  # no final newline
        endings[-1] = draw(st.sampled_from(["", "\r"]))
    lines = ["\t".join(columns)] + ["\t".join(r[c] for c in columns) for r in rows]
    text = "".join(line + eol for line, eol in zip(lines, endings))
    return columns, rows, endings, text


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(_json_chars, max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(_json_chars, max_size=4), inner, max_size=3),
    max_leaves=6,
)
extra_keys = st.text(_json_chars, min_size=1, max_size=6).filter(lambda k: k not in AOL_COLUMNS)


@st.composite
def json_records(draw: st.DrawFn) -> dict[str, Any]:
    """An object with the role keys (some optional or null) and unknown keys, in any order."""
    pairs: list[tuple[str, Any]] = [
        ("AnonID", draw(st.one_of(st.integers(0, 10**9), field_text.filter(bool)))),
        ("Query", draw(query_text)),
    ]
    if draw(st.booleans()):
        pairs.append(("QueryTime", draw(st.one_of(st.none(), field_text))))
    if draw(st.booleans()):
        pairs.append(("ItemRank", draw(st.one_of(st.none(), st.integers(1, 10), rank_text))))
    if draw(st.booleans()):
        pairs.append(("ClickURL", draw(st.one_of(st.none(), url_text))))
    pairs += draw(st.dictionaries(extra_keys, json_values, max_size=4)).items()
    return dict(draw(st.permutations(pairs)))


@st.composite
def jsonl_logs(draw: st.DrawFn) -> tuple[list[dict[str, Any]], str]:
    records = draw(st.lists(json_records(), max_size=10))
    ascii_only = draw(st.booleans())
    seps = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    lines = [json.dumps(r, ensure_ascii=ascii_only, separators=seps) for r in records]
    endings = [draw(eols) for _ in lines]
    if lines and draw(st.booleans()):
        endings[-1] = ""
    return records, "".join(line + eol for line, eol in zip(lines, endings))


# --- passthrough: byte for byte -------------------------------------------------------------------


@SETTINGS
@given(tsv_logs())
def test_tsv_passthrough_is_byte_identical(log: tuple[list[str], list[dict[str, str]], list[str], str]) -> None:
    """Header, any column order, extra columns, empty fields, unicode, CRLF, no final newline."""
    _, rows, _, text = log
    data = text.encode("utf-8")
    out, summary = run_replay(data, ".tsv")
    assert out == data
    assert summary.events_in == summary.events_out == len(rows)
    assert summary.dead_lettered == 0


@SETTINGS
@given(jsonl_logs())
def test_jsonl_passthrough_is_byte_identical(log: tuple[list[dict[str, Any]], str]) -> None:
    """Unknown keys, nested values, key order, spacing and escapes survive untouched."""
    records, text = log
    data = text.encode("utf-8")
    out, summary = run_replay(data, ".jsonl")
    assert out == data
    assert summary.events_out == len(records)


def test_empty_and_header_only_inputs(tmp_path: Path) -> None:
    """An empty file gives an empty file; a header alone is kept as it was."""
    header = b"AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
    for data in (b"", header, header + b"\r\n", header + b"\n"):
        out, summary = run_replay(data, ".tsv")
        assert out == data and summary.events_in == 0


# --- changed values: written back into the same record ------------------------------------------


@SETTINGS
@given(tsv_logs())
def test_tsv_changed_roles_keep_other_columns(log: tuple[list[str], list[dict[str, str]], list[str], str]) -> None:
    """pseudonymize + truncate_url change AnonID and ClickURL; every other column, the header, the column
    order and each line's ending stay as they were."""
    columns, rows, endings, text = log
    out, _ = run_replay(text.encode("utf-8"), ".tsv", PSEUDO_TRUNC)
    out_text = out.decode("utf-8")
    expect_lines = ["\t".join(columns)]
    for r in rows:
        changed = dict(r, AnonID=pseudonym(r["AnonID"]), ClickURL=truncate(r["ClickURL"]))
        expect_lines.append("\t".join(changed[c] for c in columns))
    expected = "".join(line + eol for line, eol in zip(expect_lines, endings))
    assert out_text == expected


@SETTINGS
@given(jsonl_logs())
def test_jsonl_changed_roles_keep_other_keys_order_and_types(log: tuple[list[dict[str, Any]], str]) -> None:
    """Changed records keep every other key with its value and type, and the key order."""
    records, text = log
    out, _ = run_replay(text.encode("utf-8"), ".jsonl", PSEUDO_TRUNC)
    out_lines = out.decode("utf-8").split("\n")
    in_lines = text.split("\n")
    assert len(out_lines) == len(in_lines), "same lines, same final-newline state"
    if out_lines[-1] == "":
        out_lines.pop()
    assert len(out_lines) == len(records)
    for rec, line, before in zip(records, out_lines, in_lines):
        assert line.endswith("\r") == before.endswith("\r"), "a CRLF line stays a CRLF line"
        got = json.loads(line.removesuffix("\r"))
        assert list(got) == list(rec)
        for key, value in rec.items():
            if key == "AnonID":
                assert got[key] == pseudonym(value)
            elif key == "ClickURL" and isinstance(value, str):
                assert got[key] == truncate(value)
            else:
                assert got[key] == value and type(got[key]) is type(value), key


def test_decimal_pseudonym_keeps_an_integer_json_id_an_integer() -> None:
    """output: decimal on an integer AnonID writes an integer back (a JSON consumer keeps its type)."""
    data = b'{"AnonID": 4417749, "Query": "q", "n": 1}\n{"AnonID": "x7", "Query": "q"}\n'
    body = f"filters:\n  - pseudonymize: {{key_env: {TEST_KEY_ENV}, output: decimal, length: 12}}\n"
    out, _ = run_replay(data, ".jsonl", body)
    first, second = (json.loads(line) for line in out.decode().splitlines())
    assert isinstance(first["AnonID"], int) and first["AnonID"] != 4417749 and first["n"] == 1
    assert isinstance(second["AnonID"], str) and len(second["AnonID"]) == 12


# --- codec units ---------------------------------------------------------------------------------


def test_tsv_codec_roles_follow_the_header() -> None:
    """Roles are found by column name; the other columns are carried as named fields."""
    codec = TsvCodec(SchemaConfig())
    codec.accept_header("QueryTime\tExtra\tAnonID\tQuery\tItemRank\tClickURL")
    ev = codec.decode("2006-03-01 00:00:00\tx\t42\tfoo bar\t\t", "\n")
    assert (ev.user, ev.query, ev.time, ev.rank, ev.url) == ("42", "foo bar", "2006-03-01 00:00:00", "", "")
    assert carried_fields(ev) == {"Extra": "x"}


def test_an_empty_query_is_an_event_and_a_missing_one_is_not() -> None:
    """An explicitly empty or blank query decodes as an event with that query (TSV, JSON), written back as its
    own line; a TSV line too short to hold the query column (wrong_column_count) and a JSON object without the
    query key or with a null one (missing_query) stay dead letters: they have no query at all."""
    tsv = TsvCodec(SchemaConfig())
    bad: list[tuple[int, str]] = []
    lines = ["1\t\t2006-03-01 00:00:00\t\t", "2\t  \tt\t1\thttp://a.com\r", "3", "4\tq\tt\t\t"]
    events = tsv.decode_many(lines, "\n", bad)
    assert [e.query for e in events] == ["", "  ", "q"] and bad == [(2, "wrong_column_count")]
    assert [tsv.encode(e) for e in events] == [lines[0], lines[1], lines[3]]
    jsonl = JsonlCodec(SchemaConfig())
    bad = []
    lines = [
        '{"AnonID": 1, "Query": ""}',
        '{"AnonID": 2, "Query": " "}',
        '{"AnonID": 3}',
        '{"AnonID": 4, "Query": null}',
    ]
    events = jsonl.decode_many(lines, "\n", bad)
    assert [e.query for e in events] == ["", " "] and bad == [(2, "missing_query"), (3, "missing_query")]
    assert [jsonl.encode(e) for e in events] == lines[:2]


def test_tsv_header_missing_a_role_column_is_an_error() -> None:
    """A header without a role's column names the missing role."""
    from sidecar.api import ConfigValueError

    codec = TsvCodec(SchemaConfig())
    with pytest.raises(ConfigValueError, match="url=ClickURL"):
        codec.accept_header("AnonID\tQuery\tQueryTime\tItemRank")


def test_jsonl_event_from_another_codec_is_encoded_fresh() -> None:
    """An event decoded as TSV, encoded as JSON: roles under their keys, extra columns carried."""
    tsv = TsvCodec(SchemaConfig())
    tsv.accept_header("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\tExtra")
    ev = tsv.decode("7\tq\tt\t1\thttp://a.com\tz", "\n")
    out = json.loads(JsonlCodec(SchemaConfig()).encode(ev))
    assert out == {
        "Extra": "z",
        "AnonID": "7",
        "Query": "q",
        "QueryTime": "t",
        "ItemRank": "1",
        "ClickURL": "http://a.com",
    }


# --- arbitrary bytes: never a crash, every line accounted for -------------------------------------

_line_bytes = st.lists(
    st.one_of(
        st.sampled_from([b"\t", b"\r", b"\xff", b"\xc3\xa9", b" ", b"q", b"1", b"http://a.com/x", b"\xe2\x82"]),
        st.binary(max_size=6).filter(lambda b: b"\n" not in b),
    ),
    max_size=40,
).map(b"".join)


@SETTINGS
@given(st.lists(_line_bytes, max_size=15), st.booleans())
def test_arbitrary_bytes_never_crash_and_every_line_is_counted(lines: list[bytes], final_newline: bool) -> None:
    """Any byte soup: the replay finishes, each line after the header is an event or a dead letter, and
    every output line is an input line, unchanged and in order."""
    header = b"AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
    data = b"\n".join([header, *lines]) + (b"\n" if final_newline else b"")
    out, summary = run_replay(data, ".tsv", "limits: {max_record_bytes: 64}\nfilters: []\n")
    rest = data[len(header) + 1 :]
    n = 0 if not rest else len(rest.split(b"\n")) - rest.endswith(b"\n")
    assert summary.events_in + summary.dead_lettered == n
    assert summary.records_in == n
    in_lines = data.split(b"\n")
    out_lines = out.split(b"\n")
    if out_lines[-1] == b"":
        out_lines.pop()
    it = iter(in_lines)
    assert all(any(o == i for i in it) for o in out_lines), "output lines are input lines, in order"
    assert summary.events_out == len(out_lines) - 1


def test_a_lone_surrogate_in_json_is_a_dead_letter_and_a_pair_is_not() -> None:
    """`"\\ud800"` alone cannot be written as UTF-8: the record is bad (`lone_surrogate`), not the run
    (issue 11, defect 11); an escaped surrogate pair (an emoji) decodes as usual."""
    from sidecar.codecs import JsonlCodec, SchemaConfig

    codec = JsonlCodec(SchemaConfig())
    bad: list[tuple[int, str]] = []
    lines = ['{"AnonID": 1, "Query": "x\\ud800"}', '{"AnonID": 2, "Query": "smile \\ud83d\\ude00"}']
    events = codec.decode_many(lines, "\n", bad)
    assert bad == [(0, "lone_surrogate")]
    assert [e.query for e in events] == ["smile \U0001f600"]
    assert codec.encode(events[0]) == lines[1]


# --- framing: a code point that breaks a line never reaches a text file raw (issue 24, item 16) -------------

#: every code point a line reader may end a line at (``str.splitlines``), and NUL
BREAKS = ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x00"]
ROW = "1\tq\t2006-03-01 07:17:12\t1\thttp://a.org"


def one_line(text: str) -> bool:
    """``text`` is one line to every reader: nothing ``str.splitlines`` splits at, no NUL."""
    return len(text.splitlines()) == 1 and "\x00" not in text


def test_line_breaks_are_the_code_points_python_splits_lines_at() -> None:
    assert sorted(LINE_BREAKS) == sorted(BREAKS)
    assert all(len(f"a{cp}b".splitlines()) == 2 for cp in BREAKS if cp != "\x00")


@pytest.mark.parametrize("cp", BREAKS, ids=ascii)
def test_tsv_value_that_breaks_a_line_is_a_dead_letter(cp: str) -> None:
    """TSV cannot escape: a line holding one is dead-lettered (``field_breaks_framing``) when read, and an event
    whose value holds one (changed by a filter, or from another format) is dead-lettered by the sink."""
    codec = TsvCodec(SchemaConfig())
    if cp != "\n":  # a line never holds a line feed (the reader splits at it)
        for line in (ROW.replace("\tq\t", f"\tq{cp}x\t"), ROW + cp + cp, cp + ROW):  # (ROW + CR: a CRLF line)
            bad: list[tuple[int, str]] = []
            assert codec.decode_many([ROW, line], "\n", bad) and bad == [(1, "field_breaks_framing")]
    event = codec.decode_many([ROW], "\n", [])[0]
    event.query = f"q{cp}x"
    with pytest.raises(BadRecord) as info:
        codec.encode(event)
    assert info.value.reason == "field_breaks_framing"
    foreign = JsonlCodec(SchemaConfig()).decode(json.dumps({"AnonID": "1", "Query": "q", "Extra": cp}), "\n")
    with pytest.raises(BadRecord):
        TsvCodec(SchemaConfig(columns=(*AOL_COLUMNS, "Extra"))).encode(foreign)


@pytest.mark.parametrize("cp", BREAKS, ids=ascii)
def test_jsonl_line_that_breaks_is_written_escaped(cp: str) -> None:
    """JSON can escape: a line holding one raw (a bare CR as whitespace; NEL, LS, PS in a string) is written
    back re-encoded with escapes, changed or not, and so is an event from another format."""
    codec = JsonlCodec(SchemaConfig())
    record = {"AnonID": "1", "Query": f"q{cp}x", "note": f"{cp}"}
    line = json.dumps(record, ensure_ascii=False)  # escapes the controls; NEL, LS and PS stay raw
    if cp == "\r":
        line = line.replace(", ", ",\r")  # a bare CR as JSON whitespace
    event = codec.decode(line, "\n")
    for out in (codec.encode(event), JsonlCodec(SchemaConfig()).encode(event)):
        assert one_line(out) and json.loads(out) == record
    event.query = f"{cp}!"
    out = codec.encode(event)
    assert one_line(out) and json.loads(out) == {**record, "Query": f"{cp}!"}
    ordinary = '{"AnonID": "1", "Query": "q"}'
    assert codec.encode(codec.decode(ordinary, "\n")) == ordinary  # ordinary input: its own bytes


@pytest.mark.parametrize("cp", BREAKS, ids=ascii)
def test_dead_letter_file_entries_stay_one_line(cp: str, tmp_path: Path) -> None:
    """Each dead letter is one line of the file whatever its record holds; the record reads back as it was."""
    dead = DeadLetters(tmp_path / "dead.jsonl")
    dead.add("invalid_json", "in", 1, f"a{cp}b")
    dead.add("invalid_utf8", "in", 2, f"a{cp}b".encode() + b"\xff")
    dead.close()
    text = (tmp_path / "dead.jsonl").read_text(encoding="utf-8")
    entries = text.splitlines()
    assert len(entries) == 2 and "\x00" not in text
    assert json.loads(entries[0])["record"] == f"a{cp}b"


def test_replay_writes_text_a_line_reader_reads_back(tmp_path: Path) -> None:
    """Through ``replay`` (file source -> file sink), every code point at once: Python's ``open()`` reads the TSV
    and JSON-lines outputs and the dead-letter file back with one line per record, none forged."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: state\ndead_letter_file: dead.jsonl\nfilters: []\n", encoding="utf-8")
    header = "\t".join(AOL_COLUMNS)
    tsv = [ROW.replace("\tq\t", f"\tq{cp}x\t") for cp in BREAKS if cp != "\n"]
    jsonl = [json.dumps({"AnonID": "1", "Query": f"q{cp}x"}, ensure_ascii=False) for cp in BREAKS]
    jsonl.append('{"AnonID": "1",\r"Query": "forged"}')
    for suffix, lines, written in ((".tsv", [header, ROW, *tsv, ROW], 3), (".jsonl", jsonl, len(jsonl))):
        src, out = tmp_path / f"in{suffix}", tmp_path / f"out{suffix}"
        src.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")
        summary = replay(load_config(cfg), str(src), str(out))
        assert summary.events_out + summary.dead_lettered == len(lines) - (suffix == ".tsv")
        with open(out, encoding="utf-8") as f:  # universal newlines, as a consumer reads the log
            got = f.read().splitlines()
        assert len(got) == written and "\x00" not in "".join(got)
        if suffix == ".jsonl":
            assert [json.loads(g)["Query"] for g in got] == [json.loads(line)["Query"] for line in jsonl]
    assert summary.dead_letter_file is not None
    with open(summary.dead_letter_file, encoding="utf-8") as f:
        dead = f.read().splitlines()
    assert [json.loads(d)["reason"] for d in dead] == ["field_breaks_framing"] * len(tsv)
