"""The dp_replace filter on events: what changes, what is kept, bad input, the budget and its ledger."""

from __future__ import annotations

import json
import random
import sqlite3
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import structlog
from helpers import GeneratedLog, find_leaks, leak_needles
from helpers.filters import build_filter, decode_tsv
from helpers.kb import kb_file

from filters.dp_replace import DpReplaceFilter
from filters.dp_replace.budget import LEDGER, read_ledger
from sidecar.api import BuildContext, Event
from sidecar.config import ConfigError, build_config, load_yaml
from sidecar.state import StateStore

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"


def lines(*rows: tuple[str, str, str, str]) -> str:
    """An AOL log: (user, query, rank, url) rows, one second apart."""
    body = [f"{u}\t{q}\t2006-03-01 00:00:{i:02d}\t{r}\t{url}" for i, (u, q, r, url) in enumerate(rows)]
    return "\n".join([HEADER, *body])


def make(tmp_path: Path, state: StateStore | None, **options: Any) -> DpReplaceFilter:
    options.setdefault("epsilon", 1.0)
    options.setdefault("kb_path", str(kb_file()))
    options.setdefault("rebuild", False)
    f: DpReplaceFilter = build_filter(DpReplaceFilter, options, tmp_path, state)
    return f


@pytest.fixture
def state(tmp_path: Path) -> Any:
    s = StateStore(tmp_path / "state")
    yield s
    s.close()


def encode(events: list[Event]) -> list[str]:
    return [e.codec.encode(e) for e in events]


def test_replaces_queries_and_keeps_the_schema(tmp_path: Path, state: StateStore) -> None:
    """Each query with a concept is replaced; the record keeps its five columns, user, time and rank; the clicked
    URL (a dependent role) is emptied on every passed event, whatever the draw; counts say what happened."""
    text = lines(
        ("7", "symptoms of the flu", "1", "http://www.flu.gov"),
        ("7", "cheap flights to new york", "", ""),
        ("8", "european soccer players", "3", "http://soccer.example"),
    )
    f = make(tmp_path, state, epsilon=3.0)
    events = decode_tsv(text)
    out = f.process(events)
    assert len(out) == 3
    for before, line in zip(text.split("\n")[1:], encode(out)):
        cols, orig = line.split("\t"), before.split("\t")
        assert len(cols) == 5
        assert cols[0] == orig[0] and cols[2] == orig[2] and cols[3] == orig[3]
        assert cols[4] == ""
        assert cols[1] and cols[1] == cols[1].lower()
    assert f.counts["replaced"] == 3 and f.counts["replaced_concepts"] >= 5
    assert out[0].meta["category_confidence"] == 0.0  # annotations describe the output, not the input


def test_replacements_are_semantically_close_at_high_epsilon(tmp_path: Path, state: StateStore) -> None:
    """With a large per-query epsilon the replacement of `influenza` is usually a disease (SQC1 favours close
    concepts), with a tiny one almost never (it is then near-uniform over the 82,115 nouns)."""
    f = make(tmp_path, state, epsilon=50.0, max_queries=1, window_seconds=None)
    tree, node = f.tree, f.tree.node("influenza.n.01")
    assert node is not None
    disease = tree.node("disease.n.01")
    assert disease is not None
    close = sum(tree.is_under(f.sampler.draw(node, 50.0).node, disease) for _ in range(300))
    far = sum(tree.is_under(f.sampler.draw(node, 0.01).node, disease) for _ in range(300))
    assert close > 200 and far < 10


@pytest.mark.parametrize(
    ("surface", "query", "check"),
    [
        ("plain", "symptoms of the flu", lambda out: " of the " not in out),
        ("shape", "symptoms of the flu", lambda out: " of the " in f" {out} "),
        ("paper", "new apple phones", lambda out: out.startswith("new ")),
    ],
)
def test_surface_modes(tmp_path: Path, state: StateStore, surface: str, query: str, check: Any) -> None:
    """plain: only the labels; shape: the stop words stay in place; paper: the modifiers are re-added as typed."""
    f = make(tmp_path, state, epsilon=5.0, surface=surface)
    (ev,) = f.process(decode_tsv(lines(("1", query, "", ""))))
    assert check(ev.query), ev.query


def test_shape_keeps_plural_and_drops_unmatched_words(tmp_path: Path, state: StateStore) -> None:
    """`shape` writes a plural concept in the plural (never a proper noun), keeps stop words in place and leaves
    out words that map to no concept (a made-up name)."""
    from filters.dp_replace.surface import render

    f = make(tmp_path, state, epsilon=5.0)
    mapped = f.mapper.map("zzyzxq dogs of the world")
    assert [p.plural for p in mapped.parts] == [True, False]
    assert render(mapped, [("cat", True), ("moon", True)], "shape", f.inflector) == "cats of the moon"
    assert render(mapped, [("paris", False), ("city", True)], "shape", f.inflector) == "paris of the city"
    assert render(mapped, [("mouse", True), ("box", True)], "shape", f.inflector) == "mice of the box"
    out = [f.process(decode_tsv(lines(("1", "zzyzxq dogs", "", ""))))[0].query for _ in range(20)]
    assert all("zzyzxq" not in q for q in out)


def test_replacement_words_read_as_the_drawn_concept(tmp_path: Path, state: StateStore) -> None:
    """The word written for a concept names it as its first sense when one of its lemmas does (post-processing of
    the drawn concept only): `influenza` for the disease, not an ambiguous synonym."""
    f = make(tmp_path, state)
    tree = f.tree
    for name in ("influenza.n.01", "dog.n.01", "soccer.n.01"):
        node = tree.node(name)
        assert node is not None
        word, countable = f.labeler.label(node)
        assert tree.senses(word)[0] == node and countable
    paris = tree.node("paris.n.01")
    assert paris is not None and f.labeler.label(paris)[1] is False  # a proper noun: never plural


@pytest.mark.parametrize(("policy", "kept"), [("drop", 0), ("empty", 1), ("keep", 1)])
def test_query_without_concept(tmp_path: Path, state: StateStore, policy: str, kept: int) -> None:
    """A query that maps to no concept (a made-up word, an empty query) is dropped by default, emptied or kept
    (unprotected) by option; counted each time, and recorded in the ledger for the audit."""
    f = make(tmp_path, state, no_concept=policy)
    out = f.process(decode_tsv(lines(("1", "zzyzxq qwxzv", "2", "http://x.example"), ("1", "", "", ""))))
    assert len(out) == 2 * kept
    assert f.counts["no_concept"] == 2 and f.counts["empty_query"] == 1
    if policy == "empty":
        assert [e.query for e in out] == ["", ""] and out[0].url == ""
    if policy == "keep":
        assert out[0].query == "zzyzxq qwxzv" and f.counts["kept_unprotected"] == 2
    _, rows = read_ledger(f.ledger.conn)  # built with a state
    assert sum(r[4][2] + r[4][3] for r in rows) == 2  # dropped + unprotected


def test_epsilon_must_be_positive_and_is_required() -> None:
    """epsilon <= 0 is a located config error; a missing epsilon too (there is no default budget)."""
    for value, problem in [("0", "must be > 0"), ("-1", "must be > 0"), (None, "required")]:
        body = "{}" if value is None else f"{{epsilon: {value}}}"
        doc = load_yaml("<test>", f"filters:\n  - dp_replace: {body}\n")
        options = doc.data["filters"][0]["dp_replace"]
        with pytest.raises(ConfigError) as err:
            build_config(DpReplaceFilter.Config, options, doc, "filters[0].dp_replace")
        assert problem in str(err.value) and "epsilon" in err.value.key
        assert str(err.value).startswith("<test>:2: filters[0].dp_replace.epsilon")  # file, line, key


def test_unknown_synset_is_a_located_error(tmp_path: Path, state: StateStore) -> None:
    """A topic or root that is not a WordNet noun synset is refused when the filter is built, naming the option."""
    from sidecar.api import ConfigValueError

    with pytest.raises(ConfigValueError) as err:
        make(tmp_path, state, domain="topics", topics=["sport.n.01", "nonsense.n.07"])
    assert err.value.key == "topics[1]"
    with pytest.raises(ConfigValueError) as err:
        make(tmp_path, state, root="abstraction.n.99")
    assert err.value.key == "root"


@pytest.mark.parametrize(("policy", "out_query"), [("drop", None), ("release", "camelpox")])
def test_single_concept_domain(tmp_path: Path, state: StateStore, policy: str, out_query: str | None) -> None:
    """A domain of one concept (a leaf synset as topic): the mechanism could only return it. Said at build (a
    warning with the count), counted per concept; `drop` leaves it out (here the query then has no concept),
    `release` lets it through unchanged."""
    with structlog.testing.capture_logs() as logs:
        f = make(
            tmp_path,
            state,
            domain="topics",
            topics=["camelpox.n.01", "disease.n.01"],
            single_concept=policy,
            surface="plain",
        )
    assert any(e["event"] == "single_concept_domains" and e["count"] == 1 for e in logs)
    out = f.process(decode_tsv(lines(("1", "camelpox", "", ""))))
    if out_query is None:
        assert out == [] and f.counts["single_concept_dropped"] == 1
    else:
        assert [e.query for e in out] == [out_query] and f.counts["single_concept_released"] == 1


def test_stream_budget_is_spent_then_suppressed_and_survives_restart(tmp_path: Path) -> None:
    """Stream mode, max_queries 3: a user's first three concepts are replaced, the fourth is suppressed (counted),
    another user is unaffected; after closing and reopening the state store (a restart), the spent user stays
    suppressed in the same window, and gets a fresh budget in the next window. Spending is an exact fraction."""
    now = [1_000_000.0]

    def build(state: StateStore) -> DpReplaceFilter:
        config = build_config(
            DpReplaceFilter.Config,
            {"epsilon": 1.0, "max_queries": 3, "window_seconds": 3600, "kb_path": str(kb_file()), "rebuild": False},
            load_yaml("<test>", "{}"),
            "filters[0].dp_replace",
        )
        ctx = BuildContext(config_dir=tmp_path, state=state, rng=random.Random(1), seed=1, clock=lambda: now[0])
        return DpReplaceFilter(config, ctx)

    state = StateStore(tmp_path / "state")
    f = build(state)
    q = [("1", "dogs", "", "")] * 4 + [("2", "cats", "", "")]
    out = f.process(decode_tsv(lines(*q)))
    assert [e.user for e in out] == ["1", "1", "1", "2"]
    assert f.counts["suppressed_budget"] == 1
    f.close()
    state.close()

    state = StateStore(tmp_path / "state")
    f = build(state)
    out = f.process(decode_tsv(lines(("1", "dogs", "", ""), ("2", "cats", "", ""))))
    assert [e.user for e in out] == ["2"] and f.counts["suppressed_budget"] == 1
    assert f.ledger is not None
    meta, rows = read_ledger(f.ledger.conn)
    assert meta["epsilon"] == "1.0" and "salt" not in meta
    assert sorted(r[2] for r in rows) == [Fraction(2, 3), Fraction(1)]  # exactly epsilon, never more
    raw = f.ledger.conn.execute(f"SELECT user FROM {LEDGER}").fetchall()
    assert all(len(bytes(u)) == 16 for (u,) in raw)  # keyed hashes, never user ids
    now[0] += 3600
    out = f.process(decode_tsv(lines(("1", "dogs", "", ""))))
    assert [e.user for e in out] == ["1"]
    f.close()
    state.close()


def test_batch_budget_uses_the_prescan(tmp_path: Path, state: StateStore) -> None:
    """Batch mode: the first pass counts each user's concepts m, each concept then costs epsilon/m, and the
    user's whole log spends exactly epsilon. Without a first pass every query is suppressed (fail closed), said
    once in the log without values."""
    f = make(tmp_path, state, epsilon=2.0, budget="batch")
    text = lines(("1", "dogs and cats", "", ""), ("1", "flu", "", ""), ("2", "zzyzxq", "", ""), ("2", "tennis", "", ""))
    f.prescan([decode_tsv(text)])
    assert f.prescanned == {"1": 3, "2": 1}
    out = f.process(decode_tsv(text))
    assert len(out) == 3 and f.counts["dropped_no_concept"] == 1
    _, rows = read_ledger(f.ledger.conn)  # built with a state
    assert sorted((r[2], r[3]) for r in rows) == [(Fraction(2), 1), (Fraction(2), 3)]
    out = f.process(decode_tsv(text))  # a second release of the same users: their budget is spent
    assert out == [] and f.counts["suppressed_budget"] == 3

    g = make(tmp_path / "other", StateStore(tmp_path / "state2"), epsilon=2.0, budget="batch")
    with structlog.testing.capture_logs() as logs:
        assert g.process(decode_tsv(text)) == []
    assert g.counts["suppressed_no_prescan"] == 3
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["budget_unknown"]


def test_logs_and_counts_hold_no_values(
    tmp_path: Path, state: StateStore, generated_log: GeneratedLog, debug_structlog: None
) -> None:
    """build -> prescan -> process -> close on a generated log (batch mode): no captured log event, count or stat
    holds a query, a user id or a planted identifier; outputs are never the input lines unchanged in bulk."""
    events = decode_tsv(generated_log.text)
    with structlog.testing.capture_logs() as logs:
        f = make(tmp_path, state, budget="batch", epsilon=1.0)
        f.prescan([events])
        out: list[Event] = []
        for i in range(0, len(events), 500):
            out += f.process(events[i : i + 500])
        stats, counts = f.stats(), dict(f.counts)
        f.close()
    json.dumps(stats)
    needles = leak_needles(generated_log.text, generated_log.stats.planted_values)
    assert find_leaks(logs, needles) == []
    assert find_leaks([counts, stats], needles) == []
    assert all(isinstance(v, int) for v in counts.values())
    assert counts["replaced"] == len(out) and counts["replaced"] > 0.8 * len(events) * 0.5


def test_budget_is_charged_before_release_and_survives_a_rolled_back_batch(tmp_path: Path, state: StateStore) -> None:
    """The spending is committed to dp_ledger.db before process() returns (another connection sees it while the
    runtime's transaction is still open), and stays when that transaction rolls back (a failed delivery or a
    crash: the runtime will process the same events again, and a fresh draw is a new release that must be paid
    for). With max_queries 2, the third draw of the same event is suppressed: never more than epsilon."""
    from filters.dp_replace.budget import LEDGER_FILE

    f = make(tmp_path, state, epsilon=1.0, max_queries=2, window_seconds=None)
    ledger = Path(state.path).with_name(LEDGER_FILE)
    conn = state.conn
    for _ in range(2):
        with state.lock:
            conn.execute("BEGIN IMMEDIATE")
            assert len(f.process(decode_tsv(lines(("1", "dogs", "", ""))))) == 1
            with sqlite3.connect(ledger) as other:  # durable already, before the batch is handed on
                (spent,) = other.execute(f"SELECT spent FROM {LEDGER}").fetchone()
            conn.execute("ROLLBACK")  # delivery failed: the runtime's state rolls back, the charge does not
    assert Fraction(spent) == Fraction(1)
    f.close()
    g = make(tmp_path, state, epsilon=1.0, max_queries=2, window_seconds=None)  # a restart
    assert g.process(decode_tsv(lines(("1", "dogs", "", "")))) == []
    assert g.counts["suppressed_budget"] == 1
    assert oct(ledger.stat().st_mode & 0o777) == "0o600"
    g.close()


def test_query_to_concepts_follows_section_3_4(tmp_path: Path, state: StateStore) -> None:
    """Paper 004 §3.4: a complex query becomes several concepts (one per noun phrase), stop words are no concepts
    but keep their place, plurals are normalised (and remembered for the output), and a phrase WordNet lacks is
    trimmed from the left (`new apple` -> apple, `big red fire trucks` -> fire truck)."""
    f = make(tmp_path, state)
    names = f.tree.names

    def concepts(q: str) -> list[tuple[str, int, bool]]:
        return [(names[p.node], p.head - p.first, p.plural) for p in f.mapper.map(q).parts]

    assert concepts("stores offering the new apple phones") == [
        ("shop.n.01", 0, True),
        ("offer.n.02", 0, False),
        ("apple.n.01", 1, False),  # `new` trimmed off as a modifier
        ("telephone.n.01", 0, True),
    ]
    assert concepts("big red fire trucks") == [("fire_engine.n.01", 2, True)]
    mapped = f.mapper.map("symptoms of the flu")
    assert mapped.shape == (0, "of", "the", 1)  # the stop words stay where they were, between the two concepts


def test_randomness_comes_from_the_csprng_unless_seeded(tmp_path: Path, state: StateStore, monkeypatch: Any) -> None:
    """Without a seed every draw's randomness is read from secrets.token_bytes (the OS CSPRNG), in 32 KiB
    blocks; with a seed (tests, benchmarks) it is not touched."""
    import sidecar.api.context as context

    calls: list[int] = []
    real = context.secrets.token_bytes

    def counting(n: int) -> bytes:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(context.secrets, "token_bytes", counting)
    config = build_config(
        DpReplaceFilter.Config,
        {"epsilon": 1.0, "kb_path": str(kb_file()), "rebuild": False},
        load_yaml("<test>", "{}"),
        "filters[0].dp_replace",
    )
    f = DpReplaceFilter(config, BuildContext(config_dir=tmp_path, state=state))
    calls.clear()  # the ledger's salt came from it too
    assert len(f.process(decode_tsv(lines(("1", "dogs", "", ""))))) == 1
    assert calls == [8 * 4096]
    f.close()
    seeded = make(tmp_path, StateStore(tmp_path / "state2"))
    calls.clear()
    seeded.process(decode_tsv(lines(("1", "dogs", "", ""))))
    assert calls == []


def test_a_first_version_ledger_is_adopted(tmp_path: Path, state: StateStore) -> None:
    """A state whose database still holds the first version's ledger tables: on first start they are copied into
    dp_ledger.db (same salt, so the same users hash to the same rows), and the spent budget carries over."""
    from filters.dp_replace.budget import META, _create

    f = make(tmp_path / "a", StateStore(tmp_path / "old"), epsilon=1.0, max_queries=1, window_seconds=None)
    f.process(decode_tsv(lines(("1", "dogs", "", ""))))  # user 1 spends everything
    assert f.ledger is not None
    meta = f.ledger.conn.execute(f"SELECT key, value FROM {META}").fetchall()
    rows = f.ledger.conn.execute(f"SELECT * FROM {LEDGER}").fetchall()
    f.close()
    _create(state.conn)  # the first version kept these tables in the state database
    state.conn.executemany(f"INSERT INTO {META} VALUES (?, ?)", meta)
    state.conn.executemany(f"INSERT INTO {LEDGER} VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    g = make(tmp_path, state, epsilon=1.0, max_queries=1, window_seconds=None)
    assert g.process(decode_tsv(lines(("1", "dogs", "", ""), ("2", "dogs", "", "")))) != []
    assert g.counts["suppressed_budget"] == 1 and g.counts["replaced"] == 1
    g.close()
