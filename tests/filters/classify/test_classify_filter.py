"""The `classify` filter: annotations, unknown policies (annotate / drop / dead_letter), config errors."""

from __future__ import annotations

import json
from pathlib import Path
from random import Random

import pytest
from helpers.kb import kb_file

from filters.classify import ClassifyFilter
from sidecar.api import BuildContext, ConfigValueError, Event
from sidecar.config import ConfigError, build_config, load_yaml
from sidecar.deadletter import DeadLetters


def _filter(tmp: Path, dead: DeadLetters | None = None, **options: object) -> ClassifyFilter:
    opts = {"kb_path": str(kb_file()), **options}
    config = build_config(ClassifyFilter.Config, opts, load_yaml("<test>", "{}"), "filters[0].classify")
    return ClassifyFilter(config, BuildContext(config_dir=tmp, rng=Random(1), seed=1, dead_letters=dead))


def _events(*queries: object) -> list[Event]:
    return [Event(f"u{i}", q, "2006-03-01 00:00:00", None, None, raw=f"u{i}\t{q}") for i, q in enumerate(queries)]


def test_annotations(tmp_path: Path) -> None:
    """A known query (flu symptoms) is annotated Health with its path, main unit and a confidence in (0, 1]; an
    unknown one gets empty annotations; counts are 1 classified and 1 unclassified, and the query text is unchanged."""
    f = _filter(tmp_path)
    out = f.process(_events("flu symptoms", "xqzvbn"))
    assert len(out) == 2
    known, unknown = out
    assert known.meta is not None and known.meta["category"] == "Health"
    assert known.meta["category_path"][0] == "Health" and known.meta["main_unit"] == "flu"
    assert 0 < known.meta["category_confidence"] <= 1
    assert unknown.meta == {"category": None, "category_path": (), "main_unit": None, "category_confidence": 0.0}
    assert f.counts == {"classified": 1, "unclassified": 1}
    assert known.query == "flu symptoms"  # the record is not changed


def test_unknown_drop(tmp_path: Path) -> None:
    """unknown: drop removes the queries the classifier cannot place, empty and None queries included, and counts
    them as dropped_unclassified."""
    f = _filter(tmp_path, unknown="drop")
    out = f.process(_events("flu symptoms", "", None, "zzzzqqq"))
    assert [e.query for e in out] == ["flu symptoms"]
    assert f.counts["dropped_unclassified"] == 3


def test_empty_query_is_never_looked_up_and_follows_unknown(tmp_path: Path) -> None:
    """An empty or blank query (a valid event: issue 11, defect 13) gets no category without a classifier look-up,
    is counted as empty_query and unclassified, and stays in the stream with unknown: annotate, unchanged."""
    f = _filter(tmp_path)
    assert f.classifier is not None
    looked_up: list[str] = []
    classify = f.classifier.lookup

    def spy(q: str) -> object:
        looked_up.append(q)
        return classify(q)

    f.classifier._by_text = spy  # a spy around the cached look-up the filter calls
    out = f.process(_events("", "   ", "\u3000", "flu symptoms"))
    assert [e.query for e in out] == ["", "   ", "\u3000", "flu symptoms"]
    assert [e.meta["category"] for e in out[:3]] == [None, None, None]
    assert looked_up == ["flu symptoms"]
    assert f.counts == {"empty_query": 3, "unclassified": 3, "classified": 1}


def test_unknown_dead_letter(tmp_path: Path) -> None:
    """unknown: dead_letter removes an unclassifiable query from the output and writes one dead-letter line with
    reason unclassified."""
    dead = DeadLetters(tmp_path / "dead.jsonl")
    f = _filter(tmp_path, dead, unknown="dead_letter")
    out = f.process(_events("ebay", "qqqzzzx"))
    dead.close()
    assert [e.query for e in out] == ["ebay"]
    assert dead.counts == {"unclassified": 1}
    (line,) = (tmp_path / "dead.jsonl").read_text().splitlines()
    assert json.loads(line)["reason"] == "unclassified"


def test_missing_kb_without_rebuild_is_a_config_error(tmp_path: Path) -> None:
    """A kb_path that does not exist, with rebuild: false, fails the build with a ConfigValueError on kb_path that
    says to run `querylog kb build`."""
    with pytest.raises(ConfigValueError) as info:
        _filter(tmp_path, kb_path=str(tmp_path / "none.qlkb"), rebuild=False)
    assert info.value.key == "kb_path" and "querylog kb build" in info.value.problem


def test_bad_unknown_policy_lists_choices() -> None:
    """An unknown value for the option unknown (ignore) is a ConfigError whose message lists the allowed values,
    dead_letter among them."""
    with pytest.raises(ConfigError) as info:
        build_config(ClassifyFilter.Config, {"unknown": "ignore"}, load_yaml("<test>", "{}"), "filters[0].classify")
    assert "dead_letter" in str(info.value)


def _decode(codec, header: str | None, lines: list[str]) -> list[Event]:  # codec: any Codec
    if header is not None:
        codec.accept_header(header)
    bad: list[tuple[int, str]] = []
    events = codec.decode_many(lines, "\n", bad)
    assert not bad
    return events


def test_output_field_tsv_existing_column(tmp_path: Path) -> None:
    """A TSV log with a Category column gets it filled; other fields and role changes survive."""
    from sidecar.codecs import SchemaConfig, TsvCodec

    codec = TsvCodec(SchemaConfig())
    header = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\tCategory"
    lines = ["1\tflu symptoms\t2006-03-01 00:00:00\t\t\t", "2\tqqqzzzx\t2006-03-01 00:00:01\t\t\tx\r"]
    evs = _decode(codec, header, lines)
    f = _filter(tmp_path, output_field="Category")
    out = f.process(evs)
    assert [codec.encode(e) for e in out] == [
        "1\tflu symptoms\t2006-03-01 00:00:00\t\t\tHealth",
        "2\tqqqzzzx\t2006-03-01 00:00:01\t\t\t\r",
    ]
    out[0].user = "pseudonym"  # a later filter changes a role: the category stays
    assert codec.encode(out[0]) == "pseudonym\tflu symptoms\t2006-03-01 00:00:00\t\t\tHealth"
    assert f.counts["output_field_written"] == 2


def test_output_field_tsv_without_column_changes_nothing(tmp_path: Path) -> None:
    """output_field naming a column the TSV header lacks leaves the line unchanged (counted output_field_no_column);
    naming a role column (Query) never overwrites it (counted output_field_is_role)."""
    from sidecar.codecs import SchemaConfig, TsvCodec

    codec = TsvCodec(SchemaConfig())
    line = "1\tflu symptoms\t2006-03-01 00:00:00\t\t"
    evs = _decode(codec, "AnonID\tQuery\tQueryTime\tItemRank\tClickURL", [line])
    f = _filter(tmp_path, output_field="Category")
    assert codec.encode(f.process(evs)[0]) == line
    assert f.counts["output_field_no_column"] == 1
    f2 = _filter(tmp_path, output_field="Query")  # a role column is never overwritten
    assert codec.encode(f2.process(_decode(codec, None, [line]))[0]) == line
    assert f2.counts["output_field_is_role"] == 1


def test_output_field_jsonl(tmp_path: Path) -> None:
    """On JSON lines output_field adds the category key after the existing keys (null when unknown), keeping key
    order and the compact separators of the input."""
    from sidecar.codecs import JsonlCodec, SchemaConfig

    codec = JsonlCodec(SchemaConfig(format="jsonl"))
    evs = _decode(codec, None, ['{"AnonID": 1, "Query": "ebay"}', '{"AnonID":2,"Query":"qqqzzzx","x":[1]}'])
    out = _filter(tmp_path, output_field="category").process(evs)
    assert [json.loads(codec.encode(e)) for e in out] == [
        {"AnonID": 1, "Query": "ebay", "category": "Shopping"},
        {"AnonID": 2, "Query": "qqqzzzx", "x": [1], "category": None},
    ]
    assert codec.encode(out[1]) == '{"AnonID":2,"Query":"qqqzzzx","x":[1],"category":null}'
