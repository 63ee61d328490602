"""querylog audit: log matcher, de-anonymizers 1-4, profile divergence, JSON and HTML outputs."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.category_buffer import CategoryBufferConfig, CategoryBufferFilter
from sidecar.api import BuildContext
from sidecar.codecs import SchemaConfig, TsvCodec
from sidecar.state import StateStore
from sidecar.tools.audit import deanon, report, utility
from sidecar.tools.audit.logs import Record, empty_queries, read_log
from sidecar.tools.audit.matcher import match

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
TOPICS = ["arts", "health", "sports", "games", "news", "science"]


def categorise(queries: list[str]) -> list[str | None]:
    """Test knowledge base: the first word names the category; `zzz` is uncategorisable."""
    return [None if q.startswith("zzz") else q.split()[0].capitalize() for q in queries]


def write_log(
    path: Path, users: int, per_user: int, seed: int, event_ids: bool = False, shared: float = 0.0
) -> list[str]:
    """Topical users; ``shared`` of the lines are one popular text per topic; optional EventID column."""
    rng = random.Random(seed)
    lines = []
    for u in range(users):
        fav = rng.sample(TOPICS, 2)
        for j in range(per_user):
            topic = rng.choice(fav) if rng.random() < 0.8 else rng.choice(TOPICS)
            text = f"{topic} portal" if rng.random() < shared else f"{topic} thing {u}-{j}"
            eid = f"\te{u}-{j}" if event_ids else ""
            lines.append(f"{1000 + u}\t{text}\t2006-03-{1 + j % 28:02d} {u % 24:02d}:00:00\t\t{eid}")
    rng.shuffle(lines)
    path.write_text(HEADER + ("\tEventID" if event_ids else "") + "\n" + "\n".join(lines) + "\n")
    return lines


def protect(src: Path, dst: Path, tmp: Path, k: int) -> int:
    """category_buffer over a TSV log, categories from the test knowledge base; returns events held."""
    codec = TsvCodec(SchemaConfig())
    text = src.read_text().splitlines()
    codec.accept_header(text[0])
    state = StateStore(tmp / f"state{k}")
    f = CategoryBufferFilter(
        CategoryBufferConfig(k=k), BuildContext(config_dir=tmp, state=state, rng=random.Random(k), seed=k)
    )
    out_lines = [text[0]]
    events = [codec.decode(line, "\n") for line in text[1:]]
    for e, c in zip(events, categorise([e.query for e in events])):
        e.annotate("category", c)
    for i in range(0, len(events), 100):
        out_lines += [codec.encode(o) for o in f.process(events[i : i + 100])]
    dst.write_text("\n".join(out_lines) + "\n")
    held = f.held()
    state.close()
    return held


class TestMatcher:
    def test_counts_pairs_and_whole_records(self) -> None:
        """The log matcher counts protected records whose (user, query) pair is original (2 of 3) and, apart, those
        identical in every field (1)."""
        orig = [Record("a", "x", "1", "a\tx\t1"), Record("b", "y", "2", "b\ty\t2")]
        prot = [Record("a", "x", "9", "a\tx\t9"), Record("a", "y", "2", "a\ty\t2"), Record("b", "y", "2", "b\ty\t2")]
        m = match(orig, prot)
        assert m["matching_records"] == 2 and m["matching_full_records"] == 1
        assert m["matching_share"] == pytest.approx(2 / 3)

    def test_no_match_when_repaired(self) -> None:
        """When every query was re-paired with the other user, no (user, query) pair matches."""
        orig = [Record("a", "x", "1", "l1"), Record("b", "y", "1", "l2")]
        prot = [Record("b", "x", "1", "l3"), Record("a", "y", "1", "l4")]
        assert match(orig, prot)["matching_records"] == 0


class TestDeanonymizers:
    def test_selection_rules(self) -> None:
        """At k=3 with A twice and B once in the set: attacker 2 pops A; attacker 3 pops the user with more
        history in the category (B, seen 3 times before in C); attacker 4 weighs both (B: 4*1 > A: 2*2? no,
        equal -> either)."""
        stream = [("B", "C"), ("B", "C"), ("B", "C")]  # B fills and leaves one slot
        first = deanon.attack(stream, deanon.ATTACKS["deanonymizer_2"], 3, 1.2, 0, flush=False)
        assert first == []  # one user only: k grows, nothing popped
        s2 = [("A", "C"), ("A", "C"), ("B", "C")]
        ((u, pos),) = deanon.attack(s2, deanon.ATTACKS["deanonymizer_2"], 3, 1.2, 0, flush=False)
        assert u == "A" and pos in range(3)
        s3 = [("B", "C"), ("X", "D"), ("B", "C"), ("B", "C"), ("A", "C")]
        guesses = deanon.attack(s3, deanon.ATTACKS["deanonymizer_3"], 4, 1.2, 0, flush=False)
        assert guesses and guesses[0][0] == "B"

    def test_unprotected_log_is_mostly_recovered_by_history(self) -> None:
        """Sanity: on an unprotected log where each category belongs mostly to one user, attacker 3
        re-links nearly everything (the attacks can succeed: they are not vacuous)."""
        stream = []
        for i in range(300):
            u = i % 3
            stream.append((f"u{u}", f"q{i}", f"C{u}" if i % 10 else "Mixed", str(i)))
        pairs = Counter((u, q) for u, q, _, _ in stream)
        res = deanon.run_all(stream, pairs, len(stream), 3, 1.2, 0)
        assert res["deanonymizer_3"]["recovered_share"] > 0.85
        assert set(res) == {f"deanonymizer_{i}{t}" for i in range(1, 5) for t in ("", "+T")}

    @pytest.mark.parametrize(("texts", "low", "high"), [(["same"] * 4, 1.0, 1.0), (["a", "b", "c", "d"], 0.0, 1.0)])
    def test_chance_level(self, texts: list[str], low: float, high: float) -> None:
        """A blind within-category shuffle "recovers" every pair when all users send the same text."""
        records = [(f"u{i}", t, "C") for i, t in enumerate(texts)]
        c = deanon.chance(records, Counter((u, q) for u, q, _ in records), 0)
        assert low <= c <= high
        unique = [(f"u{i}", f"t{i}", "C") for i in range(400)]
        assert deanon.chance(unique, Counter((u, q) for u, q, _ in unique), 0) < 0.02

    def test_per_record_ignores_coincidences_between_users_sharing_a_text(self) -> None:
        """Everyone sends the same text: every guess "recovers" a pair, but a record only when the query goes
        back to its own sender, which a blind attack manages about 1/k of the time."""
        n = 400
        senders = [f"u{i}" for i in range(n)]
        released = senders[1:] + senders[:1]  # each query released under another user
        stream = [(u, "google", "C", str(i)) for i, u in enumerate(released)]
        pairs = Counter((u, "google") for u in senders)
        records = Counter((u, f"e{i}") for i, u in enumerate(senders))
        res = deanon.run_all(stream, pairs, n, 5, 1.2, 0, {"records": ([f"e{i}" for i in range(n)], records)})
        one = res["deanonymizer_1"]
        assert one["recovered_share"] == 1.0
        assert one["recovered_records"] <= one["recovered"] and one["recovered_records_share"] < 0.1

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4), st.integers(0, 2)), min_size=1, max_size=60),
        st.randoms(use_true_random=False),
    )
    def test_record_hits_never_exceed_pair_hits(self, events: list[tuple[int, int, int]], rnd: random.Random) -> None:
        """A query put back with its own sender is also a pair put back: records <= pairs for every attack."""
        original = [(f"u{u}", f"t{t}", f"C{c}", f"e{i}") for i, (u, t, c) in enumerate(events)]
        users = [u for u, _, _, _ in original]
        rnd.shuffle(users)
        stream = [(users[i], t, c, str(i)) for i, (_, t, c, _) in enumerate(original)]
        res = deanon.run_all(
            stream,
            Counter((u, t) for u, t, _, _ in original),
            len(original),
            2,
            1.2,
            0,
            {"records": ([e for _, _, _, e in original], Counter((u, e) for u, _, _, e in original))},
        )
        for v in res.values():
            assert 0 <= v["recovered_records"] <= v["recovered"] <= len(original)

    def test_recovered_counts_a_pair_once_per_original_occurrence(self) -> None:
        """A pair that occurs once in the original counts as recovered at most once, even when the protected stream
        lets an attack guess it twice."""
        stream = [("a", "x", "C", "1"), ("a", "x", "C", "2")]
        res = deanon.run_all(stream, Counter({("a", "x"): 1}), 1, 2, 1.2, 0)
        assert res["deanonymizer_1"]["recovered"] <= 1


class TestUtility:
    @pytest.mark.parametrize(
        ("p", "q", "expected"),
        [
            ({"A": 3, "B": 1}, {"A": 6, "B": 2}, 0.0),
            ({"A": 1}, {"B": 1}, 1.0),
            ({"A": 1, "B": 1}, {"A": 1}, 0.311278),
        ],
    )
    def test_jsd_base2(self, p: dict[str, int], q: dict[str, int], expected: float) -> None:
        """Jensen-Shannon divergence in bits: 0 for proportional profiles, 1 for disjoint ones, 0.311278 for an even
        A/B profile against A alone."""
        assert utility.jsd(Counter(p), Counter(q)) == pytest.approx(expected, abs=1e-6)

    def test_compare_counts_unchanged_and_missing(self) -> None:
        """compare gives the share of users whose profile is unchanged (1 of 3), counts the user missing from the
        protected log, and averages the JSD over users present in both (0.5)."""
        o = {"a": Counter({"A": 2}), "b": Counter({"B": 1}), "c": Counter({"C": 1})}
        p = {"a": Counter({"A": 2}), "b": Counter({"A": 1})}
        r = utility.compare(o, p)
        assert r["profile_unchanged_share"] == pytest.approx(1 / 3)
        assert r["users_missing_in_protected"] == 1 and r["profile_jsd"] == pytest.approx(0.5)


class TestEndToEnd:
    @pytest.mark.parametrize("k", [2, 5])
    def test_protected_log_resists_attacks_and_keeps_profiles(self, tmp_path: Path, k: int) -> None:
        """category_buffer output: no original pair re-created, every attack at or below about 1/k,
        per-user profiles close to the original (only held events differ)."""
        src, dst = tmp_path / "orig.tsv", tmp_path / f"prot{k}.tsv"
        write_log(src, users=60, per_user=40, seed=k)
        held = protect(src, dst, tmp_path, k)
        r = report.run_audit(str(src), str(dst), categorise=categorise, k=k)
        assert r["records_protected"] + held == r["records_original"] == 2400
        assert r["matching_records"] == 0
        assert r["best_deanonymizer"]["recovered_share"] <= 1 / k
        assert r["profile_jsd"] < 0.02

    def test_cli_json_and_html(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """`querylog audit --json --html` prints one JSON object with the matching count, the profile JSD and every
        attack's recovered share, and writes a self-contained HTML page: seven inline PNG plots (attacks,
        profiles, categories; PEL/ILR, SRP, clusterings, frequencies), no external resource."""
        from sidecar.cli import main

        src, dst = tmp_path / "orig.tsv", tmp_path / "prot.tsv"
        write_log(src, users=20, per_user=20, seed=1)
        protect(src, dst, tmp_path, 5)
        monkeypatch.setattr(report, "classifier_paths", lambda: categorise)
        page = tmp_path / "r.html"
        res = CliRunner().invoke(
            main, ["audit", "--original", str(src), "--protected", str(dst), "--json", "--html", str(page)]
        )
        assert res.exit_code == 0, res.output
        data = json.loads(res.output)
        assert isinstance(data["matching_records"], int) and "profile_jsd" in data
        assert all("recovered_share" in v for v in data["deanonymizers"].values())
        text = page.read_text()
        assert text.count("data:image/png;base64,") == 7
        assert "src='http" not in text and 'src="http' not in text and "<link" not in text

    def test_cli_per_record_with_an_instance_field(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """An EventID column travels with the query through the buffer; --instance-field scores each attack per
        record, below the pair share when users share popular texts."""
        from sidecar.cli import main

        src, dst = tmp_path / "orig.tsv", tmp_path / "prot.tsv"
        write_log(src, users=40, per_user=30, seed=3, event_ids=True, shared=0.5)
        protect(src, dst, tmp_path, 5)
        monkeypatch.setattr(report, "classifier_paths", lambda: categorise)
        page = tmp_path / "r.html"
        args = ["audit", "--original", str(src), "--protected", str(dst), "--k", "5"]
        res = CliRunner().invoke(main, [*args, "--json", "--instance-field", "EventID", "--html", str(page)])
        assert res.exit_code == 0, res.output
        data = json.loads(res.output)
        assert data["instance"]["field"] == "EventID" and data["instance"]["unique_share"] == 1.0
        assert data["instance"]["present_share"] == {"original": 1.0, "protected": 1.0}
        best = data["best_records_deanonymizer"]["recovered_records_share"]
        assert 0.0 <= best <= 1 / 5 and best < data["best_deanonymizer"]["recovered_share"]
        assert data["chance_records_share"] < data["chance_share"]
        assert data["matching_own_sender_records"] == 0 < data["matching_records"]  # later sends, never own event
        identical = data["best_identical_deanonymizer"]["recovered_identical_share"]
        assert identical <= max(v["recovered_records_share"] for v in data["deanonymizers"].values())
        assert "own sender" in page.read_text()
        missing = CliRunner().invoke(main, [*args, "--instance-field", "RequestID"])
        assert missing.exit_code == 2 and "no original record has this field" in missing.output


def test_read_log_counts_bad_lines(tmp_path: Path) -> None:
    """read_log keeps well-formed records, a blank and an empty query included (records, issue 11 defect 12), and
    counts only the line without tabs as undecodable (1)."""
    p = tmp_path / "l.tsv"
    p.write_text(HEADER + "\n1\tq\tt\t\t\nbroken line\n2\t \tt\t\t\n3\t\tt\t\t\n")
    records, bad = read_log(str(p))
    assert [(r.user, r.query) for r in records] == [("1", "q"), ("2", " "), ("3", "")] and bad == 1
    assert empty_queries(records) == 2


@pytest.mark.parametrize("suffix", [".tsv", ".jsonl"])
def test_audit_counts_empty_queries_apart_from_undecodable_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """A protected log with queries scrubbed to nothing: the audit reads those records (they count as records and
    are audited), reports them as empty_queries (original / protected) next to undecodable_lines, in --json, in
    the text summary and in the HTML facts."""
    from sidecar.cli import main

    src, dst = tmp_path / f"orig{suffix}", tmp_path / f"prot{suffix}"
    rows = [("1", "health clinic"), ("2", "john smith"), ("3", "sports news"), ("4", "555-123-4567")]
    prot = [("1", "health clinic"), ("2", ""), ("3", "sports news"), ("4", "  ")]
    if suffix == ".tsv":
        src.write_text(HEADER + "\n" + "".join(f"{u}\t{q}\tt\t\t\n" for u, q in rows) + "not a record\n")
        dst.write_text(HEADER + "\n" + "".join(f"{u}\t{q}\tt\t\t\n" for u, q in prot))
    else:
        src.write_text("".join(json.dumps({"AnonID": u, "Query": q}) + "\n" for u, q in rows) + "[1]\n")
        dst.write_text("".join(json.dumps({"AnonID": u, "Query": q}) + "\n" for u, q in prot))
    r = report.run_audit(str(src), str(dst), categorise=categorise, k=2)
    assert (r["records_original"], r["records_protected"]) == (4, 4)
    assert r["empty_queries"] == {"original": 0, "protected": 2}
    assert r["undecodable_lines"] == {"original": 1, "protected": 0}
    assert r["category_counts"]["protected"]["unknown"] == 2  # an empty query has no category
    monkeypatch.setattr(report, "classifier_paths", lambda: categorise)
    page = tmp_path / "r.html"
    args = ["audit", "--original", str(src), "--protected", str(dst), "--k", "2"]
    res = CliRunner().invoke(main, [*args, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["empty_queries"] == {"original": 0, "protected": 2}
    res = CliRunner().invoke(main, [*args, "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert "empty queries: 0 / 2; undecodable lines left out: 1 / 0" in res.output
    assert "Of which with an empty query (original / protected)</th><td>0 / 2" in page.read_text()


def test_read_log_rest_is_every_field_but_the_user(tmp_path: Path) -> None:
    """Two records are identical for the audit when user and rest are: the user never enters the rest, every
    other field (carried ones included) does."""
    p = tmp_path / "l.tsv"
    p.write_text(HEADER + "\tEventID\n1\tq\tt\t2\tu\te1\n9\tq\tt\t2\tu\te1\n1\tq\tt\t2\tu\te2\n1\tq\tt2\t2\tu\te1\n")
    a, b, c, d = read_log(str(p))[0]
    assert a.rest == b.rest and len({a.rest, c.rest, d.rest}) == 3


def test_bench_event_ids_pad_short_lines_and_number_every_line(tmp_path: Path) -> None:
    """The bench's EventID column: appended after padding a line to the header's width, unique per line."""
    from sidecar.tools.bench.anonymity import EVENT_ID, with_event_ids

    src = tmp_path / "in.tsv"
    src.write_text(HEADER + "\n1\tq one\t2006-03-01 00:00:00\n2\tq two\t2006-03-01 00:00:01\t1\thttp://a\n")
    dst = with_event_ids(src, tmp_path / "ids.tsv")
    records, bad = read_log(str(dst), instance_field=EVENT_ID)
    assert bad == 0 and [(r.user, r.query, r.instance) for r in records] == [("1", "q one", "e1"), ("2", "q two", "e2")]
    assert dst.read_text().splitlines()[1].split("\t") == ["1", "q one", "2006-03-01 00:00:00", "", "", "e1"]


@pytest.mark.parametrize(
    ("matching", "pairs", "records", "ok", "words"),
    [
        (0, 0.03, None, True, "no attack does better than 1/k"),
        (0, 0.30, None, False, "no more than a blind guess"),
        (2, 0.01, 0.01, False, "re-create original"),
        (0, 0.30, 0.10, True, "Counted by pairs"),
        (0, 0.10, 0.25, False, "own sender, more than 1/k"),
    ],
)
def test_report_verdict(matching: int, pairs: float, records: float | None, ok: bool, words: str) -> None:
    """The report's headline: per record when an instance key was given, else per pair; pairs above 1/k but at
    a blind guess's level are explained, not hidden."""
    result: dict[str, object] = {
        "matching_records": matching,
        "chance_share": 0.35,
        "best_deanonymizer": {"recovered_share": pairs},
    }
    if records is not None:
        result["best_records_deanonymizer"] = {"recovered_records_share": records}
    verdict_ok, text = report.verdict(result, 5)
    assert verdict_ok is ok and words in text
