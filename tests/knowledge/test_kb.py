"""The compiled knowledge base: reproducible, checked, rebuilt or refused when broken."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from helpers.kb import kb_file

from knowledge import KBUnavailable, kb_status, load_kb
from knowledge.categories import load_taxonomy
from knowledge.store import KBCorrupt, decode
from knowledge.wordnet import LEXNAMES, lexnames_text
from sidecar.config.loader import ConfigError


@pytest.mark.slow
def test_kb_is_reproducible_from_its_sources() -> None:
    """Compiling the same sources again gives byte-identical output."""
    from knowledge.build import compile_kb

    assert hashlib.sha256(compile_kb()).hexdigest() == hashlib.sha256(kb_file().read_bytes()).hexdigest()


def test_kb_content() -> None:
    """The compiled KB: 16 categories, WordNet lemmas with their paths, modifiers, uncategorised known words kept
    apart, and a sense's topic-domain category only when no other sense of the lemma has a category."""
    kb = decode(kb_file().read_bytes())
    assert len(kb.categories) == 16
    assert kb.meta["sources"]["wordnet"]["origin"] in {"nltk", "debian"}
    assert kb.meta["counts"]["lemmas"] > 50_000
    assert "soccer" in kb.lemmas and "european" in kb.modifiers
    assert kb.path(kb.lemmas["soccer"][3])[0] == "Sports"
    # WordNet words without a category are kept apart (never spell-corrected), disjoint from lemma words
    assert "retardation" in kb.known and "retardation" not in kb.lemmas and "soccer" not in kb.known
    # a sense no anchor reaches takes its own topic domain's category...
    assert kb.categories[kb.lemmas["fractal"][1]] == "Science"
    # ...but only when no other sense of the lemma has one (``port``: harbour and wine, not the computer port)
    assert {kb.categories[c] for c in kb.lemmas["port"][1::3]} == {"Regional", "Home"}


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b"",
        lambda b: b"NOPE" + b[4:],
        lambda b: b[:-100],
        lambda b: b[:5000] + bytes([b[5000] ^ 1]) + b[5001:],
        lambda b: b[:4] + b"\x09" + b[5:],
    ],
    ids=["empty", "magic", "truncated", "bit-flip", "format"],
)
def test_corrupt_file_is_detected(damage, tmp_path: Path) -> None:  # parametrized damage function
    """Any damage (empty, bad magic, truncation, a flipped bit, unknown format) is KBCorrupt; load_kb without
    build refuses it as corrupt and says to run `querylog kb build`."""
    bad = tmp_path / "kb.qlkb"
    bad.write_bytes(damage(kb_file().read_bytes()))
    with pytest.raises(KBCorrupt):
        decode(bad.read_bytes())
    with pytest.raises(KBUnavailable, match=r"corrupt.*querylog kb build"):
        load_kb(bad, build_if_needed=False)


def test_missing_or_corrupt_cache_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_kb rebuilds a missing or corrupt file (the build is stubbed by a copy to keep the test fast)."""
    import knowledge.build as build_mod

    calls = []

    def fake_build(path: Path, categories: object = None):  # a stand-in for build()
        calls.append(path)
        shutil.copyfile(kb_file(), path)
        return build_mod.BuildReport(path, 0.0, path.stat().st_size, "", {})

    monkeypatch.setattr(build_mod, "build", fake_build)
    target = tmp_path / "cache" / "kb.qlkb"
    target.parent.mkdir()
    assert load_kb(target).categories  # missing -> built
    target.write_bytes(b"QLKB garbage")
    assert load_kb(target).categories  # corrupt -> rebuilt
    assert calls == [target, target]
    assert kb_status(target)[1] is None


def test_stale_when_categories_change(tmp_path: Path) -> None:
    """A KB built from another categories file is reported stale."""
    cats = tmp_path / "categories.yaml"
    cats.write_text("categories:\n  Sports:\n    anchors: [sport.n.01]\n")
    kb, reason = kb_status(kb_file(), cats)
    assert kb is None and reason is not None and reason.startswith("stale")


def test_missing_kb_without_build_is_a_clear_error(tmp_path: Path) -> None:
    """A missing KB without build_if_needed is KBUnavailable telling to run `querylog kb build`."""
    with pytest.raises(KBUnavailable, match="missing; run `querylog kb build`"):
        load_kb(tmp_path / "none.qlkb", build_if_needed=False)


def test_lexnames_file() -> None:
    """The generated WordNet lexnames file has the 45 lexicographer files, numbered, with their part-of-speech codes."""
    lines = lexnames_text().splitlines()
    assert len(lines) == len(LEXNAMES) == 45
    assert lines[0] == "00\tadj.all\t3" and lines[44] == "44\tadj.ppl\t3" and lines[5] == "05\tnoun.animal\t1"


def test_project_categories_file() -> None:
    """The project's categories file names 16 categories, World as the foreign category."""
    tax = load_taxonomy()
    assert len(tax.names) == 16 and tax.foreign_category == "World"


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("categories:\n  A:\n    anchors: [sport]\n", "categories.A.anchors[0]"),
        ("categories:\n  A:\n    lexnames: [noun.nothing]\n", "categories.A.lexnames[0]"),
        ("categories:\n  A:\n    lexname_defaults: [verb.body]\n", "categories.A.lexname_defaults[0]"),
        (
            "categories:\n  A:\n    lexname_defaults: [noun.act]\n  B:\n    lexname_defaults: [noun.act]\n",
            "categories.B.lexname_defaults[0]",
        ),
        ("categories:\n  A:\n    anchors: [sport.n.01]\n  B:\n    anchors: [sport.n.01]\n", "categories.B.anchors[0]"),
        ("categories:\n  A:\n    colour: red\n", "categories.A.colour"),
        ("categories:\n  A: {}\nforeign:\n  category: Z\n", "foreign.category"),
        ("categories: {}\n", "categories"),
    ],
)
def test_categories_file_errors_are_located(body: str, key: str, tmp_path: Path) -> None:
    """Each kind of error in a categories file raises ConfigError naming the file and the exact key."""
    f = tmp_path / "c.yaml"
    f.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_taxonomy(f)
    assert info.value.key == key
    assert str(info.value).startswith(f"{f}:")


def test_rebuild_failure_is_a_clear_error(tmp_path: Path) -> None:
    """A missing KB whose categories file is broken cannot be rebuilt: KBUnavailable names both."""
    cats = tmp_path / "categories.yaml"
    cats.write_text("categories: [not, a, mapping]\n")
    with pytest.raises(KBUnavailable, match=r"missing and cannot be rebuilt: .*categories"):
        load_kb(tmp_path / "kb.qlkb", categories=cats)
