"""hipaa_scrub as a filter and a command: policies, config errors, idempotence, counts, no leaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.hipaa_scrub import HipaaScrubConfig, HipaaScrubFilter, Scrubber
from filters.hipaa_scrub.geo import zip3
from sidecar.api import BuildContext, Event
from sidecar.cli import main
from sidecar.config import load_config
from sidecar.config.loader import ConfigError

SAMPLE = "john smith 123 main st plainfield nj 07060 call 555-123-4567 born 03/15/1980 age 93"


@pytest.fixture(scope="module")
def default() -> Scrubber:
    return Scrubber(HipaaScrubConfig())


def build(policies: dict[str, str] | None = None, **kw: object) -> Scrubber:
    return Scrubber(HipaaScrubConfig(policies=policies, **kw))  # options typed loosely


class TestPolicies:
    def test_remove_is_default(self, default: Scrubber) -> None:
        """Every identifier leaves (the town right after the street address with it, whatever its size);
        ordinary words and the state stay."""
        text, counts = default.scrub(SAMPLE)
        assert text == "nj call born age"
        assert counts == {"name": 1, "address": 1, "zip": 1, "phone": 1, "date": 1, "age": 1}

    def test_replace_puts_type_tokens(self) -> None:
        """default_policy: replace swaps each identifier for its type token: a phone number becomes [PHONE], an
        e-mail address [EMAIL]."""
        s = build(default_policy="replace")
        text, _ = s.scrub("call 555-123-4567 or mail jane@aol.com")
        assert text == "call [PHONE] or mail [EMAIL]"

    def test_generalize(self) -> None:
        """ZIP -> 3 digits (000 when restricted), date -> year, age -> 90+, small town -> state."""
        s = build({"zip": "generalize", "date": "generalize", "age": "generalize", "city": "generalize"})
        assert s.scrub("pizza 07060")[0] == "pizza 070"
        assert s.scrub("pizza 03601")[0] == "pizza 000"  # 036 covers 20,000 people or fewer
        assert s.scrub("born 03/15/1980")[0] == "born 1980"
        assert s.scrub("dob march 15, 1980")[0] == "dob 1980"
        assert s.scrub("birthday june 3")[0] == "birthday"  # no year to keep
        assert s.scrub("93 year old woman")[0] == "90+ year old woman"
        assert s.scrub("hope ar newspaper")[0] == "arkansas newspaper"

    def test_generalize_url_keeps_host(self) -> None:
        """url: generalize cuts a personal URL to its host (www.myspace.com) but removes a host that itself names the
        person (jane.blogspot.com)."""
        s = build({"url": "generalize"})
        assert s.scrub("www.myspace.com/johnsmith")[0] == "www.myspace.com"
        assert s.scrub("jane.blogspot.com pics")[0] == "pics"  # the host itself names her

    def test_keep_counts_but_leaves_text(self) -> None:
        """phone: keep leaves the phone number in the text and still counts it as a phone."""
        s = build({"phone": "keep"})
        text, counts = s.scrub("call 555-123-4567")
        assert text == "call 555-123-4567" and counts == {"phone": 1}

    def test_city_threshold(self) -> None:
        """Cities over the threshold stay; null scrubs every city named with its state."""
        assert build().scrub("plainfield nj plumbers")[0] == "plainfield nj plumbers"
        assert build(city_keep_population=None).scrub("plainfield nj plumbers")[0] == "nj plumbers"

    def test_bare_domains_policy(self) -> None:
        """A bare domain (myspace.com) is kept by default and removed with bare_domains: scrub."""
        assert build().scrub("myspace.com")[0] == "myspace.com"
        assert build(bare_domains="scrub").scrub("myspace.com")[0] == ""

    def test_allow_names(self) -> None:
        """allow_names (compared case-insensitively) keeps a brand that reads as a first and last name (sara lee);
        without it the pair is removed."""
        s = build(allow_names=("betty crocker", "Sara Lee"))
        assert s.scrub("sara lee cakes")[0] == "sara lee cakes"
        assert build().scrub("sara lee cakes")[0] == "cakes"

    def test_zip3(self) -> None:
        """zip3 gives a ZIP code's first three digits, or 000 for a three-digit area of 20,000 people or fewer (830)."""
        assert zip3("07060") == "070" and zip3("83001") == "000" and zip3("90210") == "902"


WORDS = st.sampled_from(
    [
        "john",
        "smith",
        "mary",
        "ann",
        "may",
        "will",
        "rose",
        "jordan",
        "paris",
        "main",
        "st",
        "ave",
        "123",
        "4500",
        "call",
        "fax",
        "ssn",
        "555-123-4567",
        "123-45-6788",
        "07060",
        "90210",
        "born",
        "03/15/1980",
        "age",
        "93",
        "years",
        "old",
        "mrn",
        "00123456",
        "jane@aol.com",
        "192.168.1.1",
        "myspace.com/jsmith",
        "hope",
        "ar",
        "nj",
        ",",
        "plainfield",
        "county",
        "orange",
        "dr",
        "po",
        "box",
        "12",
        "4111111111111111",
        "1999",
        "honda",
    ]
)


class TestIdempotence:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(WORDS, min_size=1, max_size=10).map(" ".join))
    def test_twice_equals_once(self, text: str) -> None:
        """Scrubbing the scrubbed text changes nothing (remove policies)."""
        s = _SCRUBBERS["remove"]
        once = s.scrub(text)[0]
        assert s.scrub(once)[0] == once

    @settings(max_examples=200, deadline=None)
    @given(st.lists(WORDS, min_size=1, max_size=10).map(" ".join), st.sampled_from(["replace", "generalize"]))
    def test_twice_equals_once_other_policies(self, text: str, mode: str) -> None:
        """Under replace and generalize policies too, scrubbing the scrubbed text of identifier-like words changes
        nothing."""
        s = _SCRUBBERS[mode]
        once = s.scrub(text)[0]
        assert s.scrub(once)[0] == once

    @settings(max_examples=200, deadline=None)
    @given(st.text(max_size=60))
    def test_any_text_is_safe(self, text: str) -> None:
        """Arbitrary unicode never crashes and stays idempotent."""
        s = _SCRUBBERS["remove"]
        once = s.scrub(text)[0]
        assert s.scrub(once)[0] == once


_SCRUBBERS = {
    "remove": Scrubber(HipaaScrubConfig()),
    "replace": Scrubber(HipaaScrubConfig(default_policy="replace")),
    "generalize": Scrubber(
        HipaaScrubConfig(policies={k: "generalize" for k in ("zip", "date", "age", "city", "county", "url")})
    ),
}


class TestConfig:
    def load(self, tmp_path: Path, body: str) -> object:
        path = tmp_path / "c.yaml"
        path.write_text(f"state_dir: state\nfilters:\n  - hipaa_scrub:\n{body}", encoding="utf-8")
        return load_config(path)

    def test_valid(self, tmp_path: Path) -> None:
        """A hipaa_scrub config with fields [query, url] and per-type policies loads: the roles keep their order and
        zip maps to generalize."""
        cfg = self.load(tmp_path, "      fields: [query, url]\n      policies: {zip: generalize, name: replace}\n")
        spec = cfg.filters[0]  # load() is typed object
        assert spec.config.fields == ("query", "url") and spec.config.policy_map()["zip"] == "generalize"

    @pytest.mark.parametrize(
        ("body", "fragment"),
        [
            ("      policies: {phonee: remove}\n", "policies.phonee: unknown identifier type"),
            ("      policies: {name: generalize}\n", "policies.name: type name has no generalize policy"),
            ("      policies: {zip: blur}\n", "unknown value 'blur'"),
            ("      fields: [qurey]\n", "fields: unknown role 'qurey'"),
            ("      default_policy: generalize\n", "default_policy: generalize applies to some types only"),
            ("      city_keep_population: -5\n", "must be >= 0"),
            ("      colour: red\n", "unknown key"),
        ],
    )
    def test_errors_name_file_line_key(self, tmp_path: Path, body: str, fragment: str) -> None:
        """Each bad hipaa_scrub option (unknown type, type without generalize, unknown policy, unknown role,
        generalize as default, negative population, unknown key) is a ConfigError naming the file and the key's
        problem."""
        with pytest.raises(ConfigError) as err:
            self.load(tmp_path, body)
        msg = str(err.value)
        assert fragment in msg and str(tmp_path / "c.yaml") + ":" in msg

    def test_shipped_config(self) -> None:
        """config/hipaa.yaml loads and its chain is hipaa_scrub alone."""
        root = Path(__file__).resolve().parents[3]
        cfg = load_config(root / "config" / "hipaa.yaml")
        assert [s.name for s in cfg.filters] == ["hipaa_scrub"]


class TestFilter:
    def test_process_annotates_counts_not_values(self) -> None:
        """With fields [query, url] the filter empties a query and a URL made only of identifiers, annotates that
        event with counts per type (never values), leaves a clean event unannotated, and counts found_name and
        changed_query."""
        f = HipaaScrubFilter(HipaaScrubConfig(fields=("query", "url")), BuildContext(config_dir=Path(".")))
        evs = [
            Event("u1", "john smith 555-123-4567", url="http://www.myspace.com/jsmith"),
            Event("u2", "weather"),
        ]
        out = f.process(evs)
        assert [e.query for e in out] == ["", "weather"]
        assert out[0].url == ""
        assert out[0].meta == {"scrub_counts": {"name": 1, "phone": 1, "url": 1}}
        assert out[1].meta == {}
        assert f.counts["found_name"] == 1 and f.counts["changed_query"] == 1

    @pytest.mark.parametrize(
        ("emptied", "queries", "outcome"),
        [
            ("keep", ["", "pizza", "", "   "], {}),
            ("drop", ["pizza"], {"dropped_emptied_query": 3}),
            ("token", ["[REMOVED]", "pizza", "[REMOVED]", "[REMOVED]"], {"replaced_emptied_query": 3}),
        ],
    )
    def test_emptied_policies(self, emptied: str, queries: list[str], outcome: dict[str, int]) -> None:
        """emptied decides what a query empty after scrubbing becomes (issue 11, defect 12): keep releases the
        event with its empty query, drop drops it (dropped_emptied_query), token writes [REMOVED]. It applies
        alike to a query the scrubber emptied (counted emptied_query) and to one that arrived empty or blank
        (counted empty_query); a query that keeps a word is only scrubbed."""
        f = HipaaScrubFilter(HipaaScrubConfig(emptied=emptied), BuildContext(config_dir=Path(".")))
        batch = [Event("u1", "555-123-4567"), Event("u2", "pizza 07060"), Event("u3", ""), Event("u4", "   ")]
        out = f.process(batch)
        assert [e.query for e in out] == queries
        assert f.counts["emptied_query"] == 1 and f.counts["empty_query"] == 2
        others = {"dropped_emptied_query", "replaced_emptied_query"}
        assert {k: f.counts[k] for k in others if f.counts[k]} == outcome
        if emptied == "keep":  # an event that came empty and stays empty is the same, untouched event
            assert out[2] is batch[2] and out[3].query is batch[3].query
        if emptied == "token":  # scrubbing is still idempotent: the token survives a second pass
            again = HipaaScrubFilter(HipaaScrubConfig(emptied="token"), BuildContext(config_dir=Path(".")))
            assert [e.query for e in again.process(out)] == queries

    def test_emptied_token_is_configurable_and_checked(self, tmp_path: Path) -> None:
        """emptied_token is the text written with emptied: token; an invisible one, or one that would break a
        TSV record (tab, line break), is a config error naming the key."""
        f = HipaaScrubFilter(
            HipaaScrubConfig(emptied="token", emptied_token="(scrubbed)"), BuildContext(config_dir=Path("."))
        )
        assert [e.query for e in f.process([Event("u", "jane@aol.com")])] == ["(scrubbed)"]
        for bad in ("  ", "a\tb", "x\n"):
            with pytest.raises(ConfigError, match="emptied_token"):
                TestConfig().load(tmp_path, f"      emptied: token\n      emptied_token: {json.dumps(bad)}\n")

    def test_no_value_in_logs(self, tmp_path: Path) -> None:
        """Building, running and closing the chain logs no query text."""
        from sidecar.pipeline import Pipeline

        path = tmp_path / "c.yaml"
        path.write_text("state_dir: state\nfilters:\n  - hipaa_scrub: {}\n", encoding="utf-8")
        secrets = ["john smith", "555-123-4567", "07060", "jane@aol.com"]
        with structlog.testing.capture_logs() as logs:
            p = Pipeline(load_config(path))
            out = p.process([Event("u", f"{secrets[0]} {secrets[1]} {secrets[2]} {secrets[3]}")])
            p.close()
        assert out[0].query == ""
        dumped = repr(logs)
        assert logs and not any(s in dumped for s in secrets)


class TestCommand:
    def test_one_line_out_per_line_in(self) -> None:
        """`querylog scrub` writes one scrubbed line per input line, keeping empty lines and CRLF endings, and adds
        no newline after a last line without one."""
        data = "john smith obituary\n\nweather 90210\r\nno newline 555-123-4567"
        r = CliRunner().invoke(main, ["scrub"], input=data)
        assert r.exit_code == 0
        assert r.stdout_bytes == b"obituary\n\nweather\r\nno newline"

    def test_bad_utf8_is_counted(self) -> None:
        """A line with invalid UTF-8 still gives one output line; `--stats` reports bad_utf8: 1 on stderr without the
        line's digits."""
        r = CliRunner().invoke(main, ["scrub", "--stats"], input=b"ok \xff 555-123-4567\n")
        assert r.exit_code == 0 and r.stdout_bytes.count(b"\n") == 1
        assert '"bad_utf8": 1' in r.stderr and "555" not in r.stderr

    def test_config_policies(self, tmp_path: Path) -> None:
        """`querylog scrub --config` applies the config's hipaa_scrub options: default_policy: replace turns a phone
        number into [PHONE]."""
        path = tmp_path / "c.yaml"
        path.write_text("filters:\n  - hipaa_scrub: {default_policy: replace}\n", encoding="utf-8")
        r = CliRunner().invoke(main, ["scrub", "--config", str(path)], input="call 555-123-4567\n")
        assert r.stdout == "call [PHONE]\n"

    def test_config_without_filter(self, tmp_path: Path) -> None:
        """`querylog scrub --config` with a config that has no hipaa_scrub filter exits 2 and says so on stderr."""
        path = tmp_path / "c.yaml"
        path.write_text("filters: []\n", encoding="utf-8")
        r = CliRunner().invoke(main, ["scrub", "--config", str(path)], input="x\n")
        assert r.exit_code == 2 and "no hipaa_scrub filter" in r.stderr


def test_a_remembered_text_is_scrubbed_and_counted_as_the_first_time(tmp_path: Path) -> None:
    """The filter remembers scrubbed texts: a query seen before (in this batch, an earlier one or a first pass)
    gets the same text, the same scrub_counts annotation and the same counts as the first time; the memo is
    bounded (emptied when full) and a text it leaves as it is stays the very same string."""
    import filters.hipaa_scrub as hipaa

    f = HipaaScrubFilter(HipaaScrubConfig(), BuildContext(config_dir=tmp_path))
    plain = "cheap flights to boston"

    def batch() -> list[Event]:
        return [Event("u1", SAMPLE), Event("u2", plain), Event("u3", SAMPLE)]

    first = f.process(batch())
    again = f.process(batch())
    assert [e.query for e in first] == [e.query for e in again] == ["nj call born age", plain, "nj call born age"]
    assert again[1].query is plain and "scrub_counts" not in again[1].meta
    assert all(
        e.meta["scrub_counts"] == {"name": 1, "address": 1, "zip": 1, "phone": 1, "date": 1, "age": 1}
        for e in (*first[::2], *again[::2])
    )
    assert f.counts["found_phone"] == 4 and f.counts["changed_query"] == 4
    old = hipaa.MEMO_SIZE
    hipaa.MEMO_SIZE = 1
    f._memo.clear()
    try:
        assert [e.query for e in f.process(batch())] == [e.query for e in first]
        assert len(f._memo) == 1
    finally:
        hipaa.MEMO_SIZE = old
