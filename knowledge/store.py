"""The compiled KB file: ``QLKB`` magic, format byte, SHA-256 of the payload, msgpack payload.

The payload holds only ints, strings and lists/maps built in sorted order, so the
same sources always give the same bytes. A file that is short, has the wrong
magic or format, or whose payload does not match its hash is :class:`KBCorrupt`.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

MAGIC = b"QLKB"
FORMAT = 1
_HEADER = len(MAGIC) + 1 + 32

#: Flag bits stored first in each lemma entry.
FLAG_IDENT = 1  # HIPAA-style quasi-identifier (a city, a named person): used only when nothing else is
FLAG_CURATED = 2  # a curated term from categories.yaml
FLAG_ADJ = 4  # an adjective mapped to nouns through pertainyms
FLAG_PLACE = 8  # a named state, country or region: outvoted by topic words


class KBCorrupt(Exception):
    """The KB file cannot be used (reason in the message, never file contents)."""


@dataclass(frozen=True)
class KnowledgeBase:
    """The compiled knowledge base, as plain lookup tables.

    ``lemmas[key] = (flags, cat, permille, path, cat, permille, path, ...)``: up to
    three categories with their share of the lemma's sense weight and the index of
    the L1..L5 path in ``paths`` (levels joined by ``PATH_SEP``; see :meth:`path`).
    ``zipf[word]`` is wordfreq's Zipf value x 100.
    """

    meta: dict[str, Any]
    categories: tuple[str, ...]
    paths: tuple[str, ...]
    lemmas: dict[str, tuple[int, ...]]
    zipf: dict[str, int]
    modifiers: frozenset[str]
    known: frozenset[str]  # other WordNet words (any part of speech, no category): never spell-corrected
    noun_exc: dict[str, str]
    foreign: dict[str, str]
    foreign_weak: frozenset[str]  # foreign words that are no evidence alone (close to their English frequency)
    foreign_category: int
    max_ngram: int
    sha256: str
    #: The noun taxonomy, packed (see :mod:`knowledge.concepts`; unpacked by ``concept_tree(kb)`` on first use).
    concepts: dict[str, Any]
    #: Nouns only a lexicographer file's default category reaches (``lexname_defaults``), entries as in
    #: ``lemmas``: the classifier's last resort, never a semantic unit.
    defaults: dict[str, tuple[int, ...]]

    def path(self, index: int) -> tuple[str, ...]:
        return tuple(self.paths[index].split(PATH_SEP))


PATH_SEP = "\x1f"


def pack_table(table: dict[str, int]) -> dict[str, Any]:
    """A word -> small int map as one string and one uint16 array (fast to load)."""
    words = sorted(table)
    return {"words": "\n".join(words), "values": _to_le(array("H", [table[w] for w in words]))}


def unpack_table(packed: dict[str, Any]) -> dict[str, int]:
    text, raw = packed["words"], packed["values"]
    if not text:
        return {}
    values = array("H")
    values.frombytes(raw)
    if sys.byteorder != "little":
        values.byteswap()
    words = text.split("\n")
    if len(words) != len(values):
        raise ValueError("table words and values differ in length")
    return dict(zip(words, values))


def _to_le(a: array[int]) -> bytes:
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def encode(payload: dict[str, Any]) -> bytes:
    body: bytes = msgpack.packb(payload, use_bin_type=True)
    return MAGIC + bytes([FORMAT]) + hashlib.sha256(body).digest() + body


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kb-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def decode(data: bytes) -> KnowledgeBase:
    """Check and unpack a KB file's bytes; raise :class:`KBCorrupt` when unusable."""
    if len(data) < _HEADER or data[:4] != MAGIC:
        raise KBCorrupt("not a querylog KB file (bad magic or truncated)")
    if data[4] != FORMAT:
        raise KBCorrupt(f"KB format {data[4]} is not the supported format {FORMAT}")
    body = data[_HEADER:]
    digest = hashlib.sha256(body).digest()
    if digest != data[5:_HEADER]:
        raise KBCorrupt("KB payload does not match its checksum")
    try:
        p = msgpack.unpackb(body, raw=False, use_list=False, strict_map_key=True)
        codes = tuple(p["foreign_codes"])
        return KnowledgeBase(
            meta=p["meta"],
            categories=tuple(p["categories"]),
            paths=tuple(p["paths"]),
            lemmas=p["lemmas"],
            zipf=unpack_table(p["zipf"]),
            modifiers=frozenset(p["modifiers"].split("\n")),
            known=frozenset(p["known"].split("\n")),
            noun_exc=p["noun_exc"],
            foreign={w: codes[i] for w, i in unpack_table(p["foreign"]).items()},
            foreign_weak=frozenset(p["foreign_weak"].split("\n")),
            foreign_category=int(p["foreign_category"]),
            max_ngram=int(p["max_ngram"]),
            sha256=digest.hex(),
            concepts=dict(p["concepts"]),
            defaults=p["defaults"],
        )
    except (ValueError, KeyError, TypeError, IndexError, msgpack.ExtraData, msgpack.UnpackException) as exc:
        raise KBCorrupt(f"KB payload cannot be decoded ({type(exc).__name__})") from None
