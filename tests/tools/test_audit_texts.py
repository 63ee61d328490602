"""The audit report never prints a text sent by fewer than the release's k distinct users (issue 22 item 2): not in
the HTML (tables, image titles, anything), not in the frequency chart's labels, not in --json unless
--include-texts; the release's k in titles and charts (item 5); the ILR histogram spreads its users (item 6)."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from sidecar.tools.audit import measures_microagg, plots, provenance, report, texts

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
ALONE = "quokka sanctuary renewal form 7731"  # one user, 400 times: in both top-10 tables
SHARED = "planted shared query"  # six users
FOUR = "fourfold planted text"  # four users: shown at k = 3, hidden at k = 5
ALONE_WORDS = ("quokka", "sanctuary", "renewal", "7731")


def categorise(queries: list[str]) -> list[str | None]:
    """Test knowledge base: five taxonomy names (a category is never a user's text), by the query's length."""
    return [f"Topic{len(q) % 5}" if q.strip() else None for q in queries]


def planted_log(tmp: Path) -> Path:
    """A generated log with three planted texts appended: ALONE (one user x 400), SHARED (6 users x 60) and FOUR
    (4 users x 50), all among the 10 most frequent queries."""
    from sidecar.cli import main

    src = tmp / "gen.tsv"
    assert CliRunner().invoke(main, ["generate", "-n", "40", "-o", str(src)]).exit_code == 0
    lines = [f"9999001\t{ALONE}\t2006-03-01 00:{i % 60:02d}:00\t\t" for i in range(400)]
    lines += [f"99991{u:02d}\t{SHARED}\t2006-03-02 00:{i:02d}:00\t\t" for u in range(6) for i in range(60)]
    lines += [f"99992{u:02d}\t{FOUR}\t2006-03-03 00:{i:02d}:00\t\t" for u in range(4) for i in range(50)]
    with src.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return src


def senders(path: Path) -> dict[str, set[str]]:
    """Distinct users per query text of a TSV log (the test's own count, apart from the audit's)."""
    out: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        user, query = line.split("\t")[:2]
        out.setdefault(query, set()).add(user)
    return out


def top_cells(page: str) -> list[str]:
    """The text cells of the report's top-10 query and word tables (second column of each row)."""
    section = page.split("Frequency tables", 1)[1]
    return [html.unescape(c) for c in re.findall(r"<tr><td>\d+</td><td>(.*?)</td>", section)]


@pytest.fixture
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The planted log and, as its "protected" release, the same log unchanged (the worst case: every text is in
    both logs' top 10)."""
    src = planted_log(tmp_path)
    dst = tmp_path / "released.tsv"
    dst.write_bytes(src.read_bytes())
    monkeypatch.setattr(report, "classifier_paths", lambda: categorise)
    return src, dst


def audit(src: Path, dst: Path, *extra: str) -> tuple[Any, str]:
    from sidecar.cli import main

    page = src.parent / "report.html"
    res = CliRunner().invoke(
        main, ["audit", "--original", str(src), "--protected", str(dst), "--html", str(page), *extra]
    )
    assert res.exit_code == 0, res.output
    return res, page.read_text(encoding="utf-8")


def test_html_never_shows_a_text_sent_by_fewer_than_k_users(logs: tuple[Path, Path]) -> None:
    """Default k = 5: the single user's text and its words are nowhere in the page (tables, image alt and titles,
    any embedded text), its rows read "(hidden: 1 user, 34 chars)"; FOUR (4 users) is hidden too; SHARED (6
    users) is shown; every top-table cell is either a hidden label or a text of at least 5 senders."""
    src = logs[0]
    _, page = audit(*logs)
    lowered = page.lower()
    for secret in (ALONE, FOUR, *ALONE_WORDS, "fourfold"):
        assert secret not in lowered, secret
    assert f"(hidden: 1 user, {len(ALONE)} chars)" in page
    assert f"(hidden: 4 users, {len(FOUR)} chars)" in page
    assert SHARED in page and "the release's k" in page
    who = senders(src)
    words: dict[str, set[str]] = {}
    for query, users in who.items():
        for word in measures_microagg.words(query):
            words.setdefault(word, set()).update(users)
    cells = top_cells(page)
    assert len(cells) == 20
    for cell in cells:
        if not cell.startswith("(hidden: "):
            assert len(who.get(cell, words.get(cell, set()))) >= 5, cell
    assert "Release k</th><td>5 (the default)" in page


def test_json_keeps_hidden_texts_only_with_include_texts(logs: tuple[Path, Path]) -> None:
    """--json carries no text of fewer than k senders (count and length instead) in any table, the protected
    top included; --include-texts keeps them in the JSON (marked), while the HTML of the same run still hides
    them."""
    res, _ = audit(*logs, "--json")
    out = res.output
    assert ALONE not in out and FOUR not in out and not any(w in out for w in ALONE_WORDS)
    data = json.loads(out)
    assert data["release_k"] == 5 and data["texts_included"] is False
    rows = data["microaggregation"]["top_queries"]["rows"]
    alone = next(r for r in rows if r["users"] == 1 and r["chars"] == len(ALONE))
    assert alone["text"] is None and alone["shown"] is False and alone["original"] == 400
    assert any(r["text"] == SHARED and r["shown"] for r in rows)
    res, page = audit(*logs, "--json", "--include-texts")
    data = json.loads(res.output)
    assert data["texts_included"] is True
    assert any(r["text"] == ALONE and not r["shown"] for r in data["microaggregation"]["top_queries"]["rows"])
    assert ALONE not in page and "quokka" not in page


def test_release_k_from_params_shows_a_text_of_k_users(logs: tuple[Path, Path]) -> None:
    """--params k=3: FOUR (4 users) is printed, ALONE still hidden; the page, the attack chart's 1/k line and the
    facts use k = 3 (the attacker's k follows it by default)."""
    res, page = audit(*logs, "--params", "k=3", "--json")
    assert FOUR in page and ALONE not in page
    data = json.loads(res.output)
    assert data["release_k"] == 3 and data["release_k_source"] == "--params" and data["attacker"]["k"] == 3
    assert "Reference: 1/k</th><td>33.33% (the release's k = 3)" in page


def test_release_k_from_the_configs_category_buffer() -> None:
    """The config's category_buffer k (the smallest of several), else 5; --params wins."""
    text = "filters:\n  - classify: {}\n  - category_buffer:\n      k: 7\n  - category_buffer: {k: 4}\n"
    assert provenance.release_k({}, text) == (4, "the config's category_buffer k")
    assert provenance.release_k({"k": "3"}, text) == (3, "--params")
    assert provenance.release_k(None, "filters:\n  - category_buffer: {}\n") == (5, "the config's category_buffer k")
    assert provenance.release_k(None, "filters:\n  - hipaa_scrub: {}\n") == (5, "the default")
    assert provenance.release_k(None, None) == (5, "the default")


def chart_texts(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Every text drawn in each plot (tick labels, titles, legends), by the plot's title, as the report renders
    them: read from the figures before they become PNGs."""
    from matplotlib.text import Text

    drawn: dict[str, list[str]] = {}
    real = plots.finish

    def spy(title: str, fig: Any) -> plots.Plot:
        drawn[title] = [t.get_text() for t in fig.findobj(Text)]
        return real(title, fig)

    monkeypatch.setattr(plots, "finish", spy)
    return drawn


def test_charts_never_draw_a_hidden_text(logs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The frequency chart's labels are the tables' labels: the hidden rows' count and length, SHARED's text; no
    figure draws ALONE or its words. The attack chart is titled for the release's k, its 1/k line at it."""
    drawn = chart_texts(monkeypatch)
    audit(*logs, "--params", "k=3")
    every = " ".join(t for texts_ in drawn.values() for t in texts_).lower()
    assert not any(w in every for w in (ALONE, *ALONE_WORDS))
    freq = drawn["Top-10 queries and words, original vs protected"]
    assert f"(hidden: 1 user, {len(ALONE)} chars)" in freq and SHARED in freq
    attack = " ".join(drawn["De-anonymization: paper 001's attacks 1-4 (+T = replayed in time order)"])
    assert "release k = 3" in attack and "1/k = 33.3%" in attack


def test_a_text_absent_from_the_original_counts_no_user() -> None:
    """A protected-only text (a scrubbed or drawn one) has no original sender: hidden, "no original user"."""
    table = measures_microagg.top_table(Counter({"a": 3}), Counter({"a": 1, "[NAME] street": 5}))
    texts.guard_table(table, {"a": 9}, 5, include_texts=False)
    hidden = next(r for r in table["protected_top"] if r["text"] is None)
    assert hidden["users"] == 0 and texts.label(hidden) == "(hidden: no original user, 13 chars)"
    assert table["rows"][0]["text"] == "a" and table["rows"][0]["shown"]


@given(
    st.lists(st.tuples(st.text(min_size=1, max_size=12), st.integers(0, 9)), max_size=12),
    st.integers(2, 9),
    st.booleans(),
)
def test_guarded_rows_print_a_text_only_with_k_senders(rows: list[tuple[str, int]], k: int, keep: bool) -> None:
    """For any rows: a row's label holds its text only when at least k users sent it; without --include-texts a
    row of fewer senders carries no text at all; count and length are always there."""
    table_rows = [{"text": t, "original": 1, "protected": 0} for t, _ in rows]
    users = {t: n for t, n in rows}
    texts.guard_rows(table_rows, users, k, keep)
    for row, (text, _) in zip(table_rows, rows):
        n = users[text]
        assert row["users"] == n and row["chars"] == len(text) and row["shown"] == (n >= k)
        if n >= k:
            assert texts.label(row) == text
        else:
            assert texts.label(row).startswith("(hidden: ") and (row["text"] == text) == keep


def test_word_senders_count_distinct_users_per_word() -> None:
    """A word's senders are the distinct users of every query holding it."""
    pairs = [("a", "red fox"), ("a", "red fox"), ("b", "red car"), ("c", "blue car")]
    got = texts.word_senders(pairs, {"red", "car", "fox", "green"}, measures_microagg.words)
    assert got == {"red": 2, "car": 2, "fox": 1, "green": 0}


def test_ilr_histogram_spreads_the_users_on_a_log_axis(monkeypatch: pytest.MonkeyPatch) -> None:
    """95 users between 2% and 40% and 5 at 300-500%: a linear axis to 500% put nearly everyone in one bar; the
    report's axis is logarithmic and no bar holds more than half of the users; users under 0.1% (rounding noise
    around 1e-13 % included) are counted in the axis label, not drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = [0.02 + 0.38 * i / 94 for i in range(95)] + [3.0, 3.5, 4.0, 4.5, 5.0]
    fig, ax = plt.subplots()
    plots.ilr_histogram(ax, [100 * v for v in values])
    heights = [p.get_height() for p in ax.patches]
    assert ax.get_xscale() == "log" and sum(heights) == 100 and max(heights) <= 50
    plt.close(fig)
    fig, ax = plt.subplots()
    plots.ilr_histogram(ax, [100 * v for v in values] + [1e-13, 0.0])  # rounding noise does not stretch the axis
    assert ax.get_xlim()[0] > plots.ILR_FLOOR / 2 and "2 users under 0.1% not drawn" in ax.get_xlabel()
    plt.close(fig)
    fig, ax = plt.subplots()
    plots.ilr_histogram(ax, [10.0, 12.0, 15.0, 20.0, 0.0])  # nothing dwarfs the rest: linear, the zero drawn
    assert ax.get_xscale() == "linear" and sum(p.get_height() for p in ax.patches) == 5
    plt.close(fig)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"provenance": {"params": {"k": "3"}}, "release_k": 3, "release_k_source": "--params"}, (3, "from --params")),
        (
            {"provenance": {"params": {}}, "release_k": 7, "release_k_source": "the config's category_buffer k"},
            (7, "the config's category_buffer k"),
        ),
        ({"provenance": {"params": {}}, "release_k": 5, "release_k_source": "the default"}, (None, "")),
    ],
)
def test_pel_and_srp_lines_use_the_releases_k_when_stated(
    result: dict[str, Any], expected: tuple[int | None, str]
) -> None:
    """PEL's and SRP's 1/k lines: the microaggregation's k, else the k the config states; never a default nobody
    stated (the reference then says the k is unknown)."""
    assert plots.reference_k(result) == expected
