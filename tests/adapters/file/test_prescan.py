"""``replay --prescan``: category_buffer learns the archive's future pairs and re-creates none of them."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from helpers import QUERYLOG
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.config import load_config
from sidecar.drive import replay

CHAIN = """\
state_dir: {state}
dead_letter_file: null
schema: {{format: tsv, header: true}}
filters:
  - category_buffer: {{k: {k}, category_field: Cat, avoid_repeat_pairs: 0, max_k_policy: hold}}
"""


def shared_text_log(path: Path, seed: int, n: int, users: int, texts: int, cats: int) -> list[tuple[str, str]]:
    """A log where few texts are shared by many users (the worst case for (user, query) matches)."""
    rng = random.Random(seed)
    rows = [(f"u{rng.randrange(users)}", f"q{rng.randrange(texts)}") for _ in range(n)]
    lines = ["AnonID\tQuery\tQueryTime\tItemRank\tClickURL\tCat"]
    lines += [f"{u}\t{q}\t{i:06d}\t\t\tC{int(q[1:]) % cats}" for i, (u, q) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


def protected_pairs(out: Path) -> list[tuple[str, str]]:
    lines = out.read_text(encoding="utf-8").splitlines()[1:]
    return [(p[0], p[1]) for p in (line.split("\t") for line in lines)]


def run(tmp: Path, src: Path, k: int, prescan: bool, seed: int = 1) -> tuple[list[tuple[str, str]], int]:
    cfg = tmp / f"c{int(prescan)}.yaml"
    cfg.write_text(CHAIN.format(state=tmp / f"state{int(prescan)}", k=k), encoding="utf-8")
    out = tmp / f"out{int(prescan)}.tsv"
    summary = replay(load_config(cfg), str(src), str(out), seed=seed, prescan=prescan)
    return protected_pairs(out), summary.events_held


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 6), texts=st.integers(3, 40))
def test_prescan_leaves_no_matching_pair(
    tmp_path_factory: pytest.TempPathFactory, seed: int, k: int, texts: int
) -> None:
    """Whatever the sharing of texts between users, no protected (user, query) is an original pair."""
    tmp = tmp_path_factory.mktemp("p")
    src = tmp / "in.tsv"
    original = set(shared_text_log(src, seed, 400, 25, texts, 3))
    pairs, held = run(tmp, src, k, prescan=True, seed=seed)
    assert not [p for p in pairs if p in original]
    assert len(pairs) + held == 400  # released once or still held: nothing lost


def test_without_prescan_future_sends_match(tmp_path: Path) -> None:
    """The same stream without the first pass re-creates pairs the users send later: the pass matters."""
    src = tmp_path / "in.tsv"
    original = set(shared_text_log(src, 7, 2000, 30, 15, 2))
    plain, _ = run(tmp_path, src, 3, prescan=False)
    scanned, _ = run(tmp_path, src, 3, prescan=True)
    assert sum(p in original for p in plain) > 0
    assert sum(p in original for p in scanned) == 0


def test_prescan_keeps_profiles(tmp_path: Path) -> None:
    """Users keep their category counts: released + held per (user, category) equals the input."""
    src = tmp_path / "in.tsv"
    rows = shared_text_log(src, 3, 600, 20, 12, 3)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CHAIN.format(state=tmp_path / "state", k=3), encoding="utf-8")
    out = tmp_path / "out.tsv"
    summary = replay(load_config(cfg), str(src), str(out), seed=2, prescan=True)
    got = Counter((p[0], p[5]) for p in (line.split("\t") for line in out.read_text().splitlines()[1:]))
    want = Counter((u, f"C{int(q[1:]) % 3}") for u, q in rows)
    assert summary.events_out + summary.events_held == 600
    assert all(got[key] <= n for key, n in want.items())
    assert sum(want.values()) - sum(got.values()) == summary.events_held


@pytest.mark.parametrize(
    ("filters", "stdin", "message"),
    [
        ("  - pseudonymize: {key_env: QL_TEST_KEY}\n", False, "no filter of this chain uses a first pass"),
        ("  - profile: {}\n  - category_buffer: {category_field: Cat}\n", False, "keeps state"),
        ("  - category_buffer: {category_field: Cat}\n", True, "not stdin"),
    ],
)
def test_prescan_refusals(tmp_path: Path, filters: str, stdin: bool, message: str) -> None:
    """A chain or input the first pass cannot serve: a one-line reason and exit code 2, nothing written."""
    src = tmp_path / "in.tsv"
    shared_text_log(src, 1, 20, 5, 5, 2)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"state_dir: {tmp_path / 'state'}\nschema: {{format: tsv, header: true}}\nfilters:\n{filters}")
    args = [QUERYLOG, "replay", "-c", str(cfg), "-" if stdin else str(src), "-o", str(tmp_path / "o.tsv"), "--prescan"]
    env = {**os.environ, "QL_TEST_KEY": "k" * 32}
    proc = subprocess.run(args, input=src.read_bytes(), capture_output=True, env=env)
    assert proc.returncode == 2
    assert message in proc.stderr.decode()
    assert "u1" not in proc.stderr.decode() and "q1" not in proc.stderr.decode()


def test_prescan_sees_events_as_the_buffer_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With pseudonymize in front, the first pass learns the pseudonymised pairs: still no match."""
    from filters.pseudonymize import PseudonymizeConfig, PseudonymizeFilter
    from sidecar.api import BuildContext

    monkeypatch.setenv("QL_PRESCAN_KEY", "p" * 32)
    src = tmp_path / "in.tsv"
    rows = shared_text_log(src, 11, 1500, 30, 10, 2)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"state_dir: {tmp_path / 'state'}\ndead_letter_file: null\nschema: {{format: tsv, header: true}}\n"
        "filters:\n  - pseudonymize: {key_env: QL_PRESCAN_KEY}\n"
        "  - category_buffer: {k: 3, category_field: Cat, avoid_repeat_pairs: 0, max_k_policy: hold}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.tsv"
    summary = replay(load_config(cfg), str(src), str(out), seed=5, prescan=True)
    pseudo = PseudonymizeFilter(PseudonymizeConfig(key_env="QL_PRESCAN_KEY"), BuildContext(config_dir=tmp_path))
    original = {(pseudo.pseudonym(u), q) for u, q in rows}
    pairs = protected_pairs(out)
    assert pairs and all(u in {p for p, _ in original} for u, _ in pairs)  # the output users are pseudonyms
    assert not [p for p in pairs if p in original]
    assert summary.events_out + summary.events_held == 1500


def test_cli_prescans_by_default_and_says_when_it_cannot(tmp_path: Path) -> None:
    """`replay` with a category_buffer chain reads a file twice unless told not to; from stdin it replays as a
    stream and logs why (a reason code, no value); --no-prescan is a live stream, which re-creates pairs."""
    src = tmp_path / "in.tsv"
    original = set(shared_text_log(src, 7, 2000, 30, 15, 2))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CHAIN.format(state=tmp_path / "state", k=3), encoding="utf-8")

    def cli(name: str, *extra: str, stdin: bool = False) -> tuple[list[tuple[str, str]], str]:
        out = tmp_path / f"{name}.tsv"
        shutil.rmtree(tmp_path / "state", ignore_errors=True)
        proc = subprocess.run(
            [QUERYLOG, "replay", "-c", str(cfg), "-" if stdin else str(src), "-o", str(out), "--seed", "3", *extra],
            input=src.read_bytes(),
            capture_output=True,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        return protected_pairs(out), proc.stderr.decode()

    auto, err = cli("auto")
    assert auto and not [p for p in auto if p in original] and "prescan_skipped" not in err
    live, err = cli("live", "--no-prescan")
    assert [p for p in live if p in original] and "prescan_skipped" not in err
    piped, err = cli("piped", stdin=True)
    assert "prescan_skipped" in err and "stdin" in err and "u1\t" not in err
    assert [p for p in piped if p in original]


def test_prescan_runs_the_chains_own_filters_once_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pass uses the pipeline's own hipaa_scrub (no second build), which then counts each event once,
    as a replay without the first pass does; the scrubbed text reaches the pass (no pair of it is re-created)."""
    import filters.hipaa_scrub as hipaa

    built: list[object] = []
    real_init = hipaa.HipaaScrubFilter.__init__

    def counting_init(self: hipaa.HipaaScrubFilter, *args: object) -> None:
        built.append(self)
        real_init(self, *args)

    monkeypatch.setattr(hipaa.HipaaScrubFilter, "__init__", counting_init)
    src = tmp_path / "in.tsv"
    rows = shared_text_log(src, 5, 600, 20, 8, 2)
    lines = src.read_text(encoding="utf-8").splitlines()
    # every third query carries a phone number the scrubber removes: its scrubbed text is shared by many users
    lines[1:] = [
        line.replace("\tq", "\tcall 555-867-5309 q", 1) if i % 3 == 0 else line for i, line in enumerate(lines[1:])
    ]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def counts(prescan: bool) -> tuple[dict[str, int], list[tuple[str, str]], int]:
        cfg = tmp_path / f"c{int(prescan)}.yaml"
        cfg.write_text(
            f"state_dir: {tmp_path / f'state{int(prescan)}'}\ndead_letter_file: null\n"
            "schema: {format: tsv, header: true}\nfilters:\n  - hipaa_scrub: {}\n"
            "  - category_buffer: {k: 3, category_field: Cat, avoid_repeat_pairs: 0, max_k_policy: hold}\n",
            encoding="utf-8",
        )
        out = tmp_path / f"out{int(prescan)}.tsv"
        summary = replay(load_config(cfg), str(src), str(out), seed=4, prescan=prescan)
        return summary.events_out + summary.events_held, protected_pairs(out), summary.events_in

    before = len(built)
    total, pairs, n = counts(True)
    assert len(built) - before == 1  # one scrubber per chain, shared with the first pass
    assert total == n == 600
    scrub = hipaa.Scrubber().scrub
    original = {(f[0], scrub(f[1])[0]) for f in (line.split("\t") for line in lines[1:])}
    assert {q for _, q in original} > {q for _, q in rows}  # scrubbed texts are among the pairs
    assert not [p for p in pairs if p in original]
    scrubber = built[-1]
    assert isinstance(scrubber, hipaa.HipaaScrubFilter)
    assert scrubber.counts["found_phone"] == 200  # counted once per event, not once per pass
    assert scrubber.counts["changed_query"] == 200
