"""hipaa_scrub issue 28 item 3, tunable as Presidio is: custom recognizers (patterns with checksums, deny lists,
context words), confidences with per-type thresholds, operators (mask, keyed hash, keyed reversible encryption),
`scrub --explain` with score and operator, `scrub --decrypt`, and located config errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.hipaa_scrub import HipaaScrubConfig, HipaaScrubFilter, Scrubber
from filters.hipaa_scrub.custom import CustomRecognizer
from filters.hipaa_scrub.operators import OperatorKeys, decrypt_tokens, mask
from sidecar.api import BuildContext, Event
from sidecar.cli import main
from sidecar.config import load_config
from sidecar.config.loader import ConfigError

KEYS = OperatorKeys.derive(b"0123456789abcdef-test-secret", "k1")
OTHER = OperatorKeys.derive(b"another-secret-of-enough-bytes", "k2")


def rec(**kw: object) -> CustomRecognizer:
    return CustomRecognizer(**kw)  # type: ignore[arg-type]  # options typed loosely in tests


# (query, found types) with one custom recognizer of each kind; negatives beside positives
EMPLOYEE = rec(
    name="emp",
    type="employee_id",
    patterns=(r"\bemp-\d{6}\b",),
    score=0.5,
    context=("employee",),
    negative_context=("sample",),
)
IBAN = rec(name="iban", type="account", patterns=(r"\b[a-z]{2}\d{2}[a-z0-9]{11,30}\b",), validator="iban", score=0.9)
DENY = rec(name="codenames", type="project", deny_list=("project bluebird", "nightjar"))
CUSTOM = [
    ("employee emp-123456 badge", ("employee_id",)),
    ("emp-123456", ("employee_id",)),
    ("emp-12345", ()),  # five digits: no match
    ("de89370400440532013000 transfer", ("account",)),  # a valid IBAN (ISO 13616 example)
    ("de89370400440532013001 transfer", ("id",)),  # checksum fails: not an account, only the catch-all long code
    ("project bluebird status", ("project",)),
    ("Project  Bluebird", ("project",)),
    ("bluebird project", ()),
    ("nightjar", ("project",)),
    ("nightjars", ()),  # whole words only
]


@pytest.fixture(scope="module")
def custom() -> Scrubber:
    return Scrubber(HipaaScrubConfig(recognizers=(EMPLOYEE, IBAN, DENY)))


@pytest.mark.parametrize(("query", "want"), CUSTOM, ids=[q for q, _ in CUSTOM])
def test_custom_recognizers(custom: Scrubber, query: str, want: tuple[str, ...]) -> None:
    assert tuple(s.kind for s in custom.detect(query)) == want


def test_context_raises_and_lowers_confidence_and_thresholds_drop(custom: Scrubber) -> None:
    """Score 0.5 bare, 0.85 after a context word, 0.15 near a negative one; a threshold of 0.6 on the type keeps
    only the one with context."""
    scores = [custom.detect(q)[0].score for q in ("emp-123456", "employee emp-123456", "sample emp-123456")]
    assert scores == [0.5, 0.85, 0.15]
    strict = Scrubber(HipaaScrubConfig(recognizers=(EMPLOYEE,), thresholds={"employee_id": 0.6}))
    assert [len(strict.detect(q)) for q in ("emp-123456", "employee emp-123456", "sample emp-123456")] == [0, 1, 0]


def test_name_confidence_and_threshold() -> None:
    """A first + last name's score is its census odds; a threshold above a pair's odds keeps the pair, one below
    drops nothing; the other types are untouched."""
    base = Scrubber(HipaaScrubConfig())
    (span,) = base.detect("john smith")
    assert 0.97 <= span.score < 1.0
    lenient = Scrubber(HipaaScrubConfig(thresholds={"name": 0.5}))
    assert lenient.scrub("john smith 555-123-4567")[0] == ""
    strict = Scrubber(HipaaScrubConfig(thresholds={"name": 1.0}))
    assert strict.scrub("john smith 555-123-4567")[0] == "john smith"


SSN = "ssn 123-45-6788"


def test_operators_per_type() -> None:
    """mask keeps the last four characters, hash writes a keyed token (same value, same token; another key,
    another token), encrypt a token key holders open again; replace and generalize as before."""

    def scrub(policy: str, text: str = SSN, keys: OperatorKeys | None = KEYS) -> str:
        return Scrubber(HipaaScrubConfig(policies={"ssn": policy}, key_env="K"), keys=keys).scrub(text)[0]  # type: ignore[dict-item]

    assert scrub("mask") == "ssn ***-**-6788"
    assert scrub("replace") == "ssn [SSN]"
    hashed = scrub("hash")
    assert hashed.startswith("ssn <SSN#") and len(hashed) == len("ssn <SSN#>") + 16
    assert scrub("hash") == hashed and scrub("hash", keys=OTHER) != hashed
    assert scrub("hash", "ssn 123-45-6789 x") != hashed  # another value
    sealed = scrub("encrypt")
    assert sealed.startswith("ssn <SSN:k1:") and "6788" not in sealed
    assert decrypt_tokens(KEYS, sealed) == (SSN, 1)
    assert decrypt_tokens(OTHER, sealed) == (sealed, 0)  # another key id: left as it is
    tampered = sealed[:-3] + ("A" if sealed[-3] != "A" else "B") + sealed[-2:]
    assert decrypt_tokens(KEYS, tampered)[1] == 0  # fails authentication


def test_safe_harbor_generalisations() -> None:
    s = Scrubber(HipaaScrubConfig(policies={"date": "generalize", "zip": "generalize"}))
    assert s.scrub("born 03/15/1980 in 07060")[0] == "born 1980 in 070"
    assert s.scrub("clinic 03601")[0] == "clinic 000"  # a restricted ZIP3 (population under 20,000)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="0123456789-. abcdefgh", min_size=0, max_size=24))
def test_mask_keeps_shape_and_last_four(value: str) -> None:
    masked = mask(value)
    assert len(masked) == len(value)
    assert [c for c in masked if not c.isalnum() and c != "*"] == [c for c in value if not c.isalnum()]
    alnum = [c for c in value if c.isalnum()]
    visible = [c for c in masked if c.isalnum()]
    assert visible == (alnum[-4:] if len(alnum) > 4 else [])


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["ssn 123-45-6788", "call 555-123-4567", "john smith", "mrn 00123456", "x@y.com"]),
    st.sampled_from(["hash", "encrypt", "mask"]),
)
def test_keyed_and_mask_operators_are_idempotent(text: str, policy: str) -> None:
    """A second scrub changes nothing: a token this filter wrote is never scanned again."""
    s = Scrubber(HipaaScrubConfig(default_policy=policy, key_env="K"), keys=KEYS)  # type: ignore[arg-type]
    once = s.scrub(text)[0]
    assert s.scrub(once)[0] == once


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(f"state_dir: state\nfilters:\n  - hipaa_scrub:\n{body}", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("      policies: {ssn: hash}\n", "key_env: the hash and encrypt policies need a secret"),
        ("      policies: {ssn: scramble}\n", "unknown value 'scramble'"),
        ("      thresholds: {nam: 0.5}\n", "thresholds.nam: unknown identifier type"),
        ("      thresholds: {name: 1.5}\n", "thresholds.name: must be between 0 and 1"),
        (
            "      recognizers:\n        - {name: a, type: x, patterns: ['(']}\n",
            "patterns[0]: not a regular expression",
        ),
        ("      recognizers:\n        - {name: a, type: x, patterns: ['a*']}\n", "patterns[0]: matches the empty text"),
        ("      recognizers:\n        - {name: a, type: X-1, deny_list: [b]}\n", "type: a type is"),
        ("      recognizers:\n        - {name: a, type: x}\n", "patterns: a recognizer needs patterns or a deny_list"),
        ("      recognizers:\n        - {name: a, type: x, deny_list: [b], validator: crc}\n", "unknown value 'crc'"),
        ("      recognizers:\n        - {name: a, type: x, deny_list: [b], score: 2}\n", "must be <= 1.0"),
        ("      policies: {employee: mask}\n", "policies.employee: unknown identifier type"),
    ],
)
def test_config_errors_are_located(tmp_path: Path, body: str, fragment: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert fragment in str(err.value) and f"{path}:" in str(err.value)


def test_custom_type_from_yaml_gets_its_policy(tmp_path: Path) -> None:
    """A recognizer's new type takes a policy and a threshold from the same file; the filter reads the secret
    from key_file (relative to the config) and records the key id in encrypted tokens."""
    (tmp_path / "scrub.key").write_bytes(b"a-secret-of-sixteen-bytes-or-more\n")
    path = write(
        tmp_path,
        "      key_file: scrub.key\n      key_id: abuse-2026\n"
        "      policies: {employee_id: encrypt, ssn: mask}\n      thresholds: {employee_id: 0.6}\n"
        "      recognizers:\n        - name: emp\n          type: employee_id\n"
        "          patterns: ['\\bemp-\\d{6}\\b']\n"
        "          score: 0.5\n          context: [employee]\n",
    )
    spec = load_config(path).filters[0]
    f = HipaaScrubFilter(spec.config, BuildContext(config_dir=tmp_path))  # type: ignore[arg-type]
    out = f.process([Event("u", "employee emp-123456 ssn 123-45-6788"), Event("v", "emp-123456 lunch")])
    assert out[0].query.startswith("employee <EMPLOYEE_ID:abuse-2026:") and out[0].query.endswith(" ssn ***-**-6788")
    assert out[1].query == "emp-123456 lunch"  # 0.5 < 0.6 without context
    r = CliRunner().invoke(main, ["scrub", "-c", str(path), "--decrypt"], input=out[0].query + "\n")
    assert r.exit_code == 0 and r.stdout == "employee emp-123456 ssn ***-**-6788\n"


def test_short_secret_is_refused(tmp_path: Path) -> None:
    (tmp_path / "k").write_bytes(b"short")
    cfg = HipaaScrubConfig(policies={"ssn": "hash"}, key_file="k")
    with pytest.raises(ValueError, match="fewer than 16 bytes"):
        HipaaScrubFilter(cfg, BuildContext(config_dir=tmp_path))


def test_explain_shows_score_and_operator(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "      policies: {ssn: mask}\n      recognizers:\n        - {name: codes, type: project, "
        "deny_list: [nightjar], score: 0.7}\n",
    )
    r = CliRunner().invoke(main, ["scrub", "-c", str(path), "--explain"], input="nightjar ssn 123-45-6788\n")
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)
    assert row["scrubbed"] == "ssn ***-**-6788"
    got = [(f["type"], f["detector"], f["score"], f["policy"]) for f in row["findings"]]
    assert got == [("project", "codes", 0.7, "remove"), ("ssn", "SsnDetector", 1.0, "mask")]
    assert "nightjar" not in r.stdout.replace(row["scrubbed"], "") and "6788" not in json.dumps(row["findings"])


def test_readme_example_loads_and_scrubs(tmp_path: Path) -> None:
    """The README's recognizers example is a valid hipaa_scrub config and does what its comments say."""
    readme = (Path(__file__).resolve().parents[3] / "filters" / "hipaa_scrub" / "README.md").read_text("utf-8")
    block = readme.split("```yaml\nrecognizers:", 1)[1].split("```", 1)[0]
    body = "".join(f"      {line}\n" for line in ("recognizers:" + block).splitlines())
    (tmp_path / "scrub.key").write_bytes(b"sixteen-bytes-or-more-secret")
    spec = load_config(write(tmp_path, body)).filters[0]
    f = HipaaScrubFilter(spec.config, BuildContext(config_dir=tmp_path))  # type: ignore[arg-type]
    out = f.process([Event("u", "employee emp-123456 nightjar ssn 123-45-6788 de89370400440532013000")])
    assert out[0].query.startswith("employee <EMPLOYEE_ID:abuse-2026:")
    assert out[0].query.endswith(" ssn ***-**-6788")


def test_patterns_written_in_upper_case_still_match() -> None:
    """Patterns see the lowercased text, case-insensitively: a pattern written for upper-case codes works."""
    s = Scrubber(HipaaScrubConfig(recognizers=(rec(name="c", type="case_no", patterns=(r"\bCASE-[A-Z]{2}\d{4}\b",)),)))
    assert s.scrub("status of CASE-AB1234 today")[0] == "status of today"
    assert s.scrub("status of case-ab12 today")[0] == "status of case-ab12 today"
