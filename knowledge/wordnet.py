"""Where WordNet 3.0 comes from: nltk's own ``wordnet`` data, else the Debian files.

Debian's ``wordnet-base`` / ``wordnet-sense-index`` install the WordNet 3.0
database under ``/usr/share/wordnet``. nltk reads the same format but also wants
a ``lexnames`` file (the fixed list of the 45 lexicographer files), which Debian
does not ship, and nltk's path sandbox refuses symlinks that leave the corpus
folder. :func:`open_wordnet` therefore copies the files it needs into a
temporary folder, writes ``lexnames`` there, and opens nltk's reader on it.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The 45 WordNet 3.0 lexicographer files, in file-number order (the ``lexnames`` file).
LEXNAMES: tuple[str, ...] = (
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
)
_POS_NUMBER = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}

#: Files of the WordNet database that nltk's reader opens (plus ``lexnames``).
WORDNET_FILES: tuple[str, ...] = (
    "data.noun",
    "data.verb",
    "data.adj",
    "data.adv",
    "index.noun",
    "index.verb",
    "index.adj",
    "index.adv",
    "noun.exc",
    "verb.exc",
    "adj.exc",
    "adv.exc",
    "cntlist.rev",
    "index.sense",
)
#: Files whose bytes identify the WordNet source in the KB's provenance hash.
HASHED_FILES: tuple[str, ...] = ("data.noun", "data.adj", "index.noun", "index.adj", "noun.exc", "cntlist.rev")

DEBIAN_DIR = Path("/usr/share/wordnet")


class WordNetMissing(RuntimeError):
    """No WordNet data could be found (message says how to install it)."""


def lexnames_text() -> str:
    """The ``lexnames`` file nltk expects: ``NN<TAB>name<TAB>pos-number`` per line."""
    return "".join(f"{i:02d}\t{name}\t{_POS_NUMBER[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


@dataclass(frozen=True)
class WordNetSource:
    """A located WordNet database: its folder, where it came from and a content hash."""

    folder: Path
    origin: str  # "nltk" or "debian"
    sha256: str


def _hash_files(folder: Path) -> str:
    h = hashlib.sha256()
    for name in HASHED_FILES:
        path = folder / name
        if path.is_file():
            h.update(name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _nltk_folder() -> Path | None:
    """nltk's own unpacked ``corpora/wordnet`` folder, when installed."""
    try:
        import nltk

        found = nltk.data.find("corpora/wordnet")
    except (LookupError, OSError, ValueError, PermissionError):
        return None
    path = Path(str(found))
    return path if (path / "data.noun").is_file() and (path / "lexnames").is_file() else None


def locate(debian_dir: Path = DEBIAN_DIR) -> WordNetSource:
    """Find WordNet: nltk's data first, else the Debian files; raise :class:`WordNetMissing`."""
    folder = _nltk_folder()
    if folder is not None:
        return WordNetSource(folder, "nltk", _hash_files(folder))
    missing = [n for n in WORDNET_FILES if not (debian_dir / n).is_file()]
    if missing:
        raise WordNetMissing(
            f"WordNet 3.0 not found: no nltk 'wordnet' data and {debian_dir} lacks {', '.join(missing)}; "
            "install the Debian packages wordnet-base and wordnet-sense-index (./run setup does)"
        )
    return WordNetSource(debian_dir, "debian", _hash_files(debian_dir))


@contextmanager
def open_wordnet(source: WordNetSource) -> Iterator[Any]:
    """Yield an nltk ``WordNetCorpusReader`` over ``source`` (a private copy for Debian files)."""
    import warnings

    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class _Reader(WordNetCorpusReader):  # type: ignore[misc]  # nltk is untyped: its classes are Any
        def map_wn(self, version: str = "wordnet") -> None:
            # The OMW 3.0 mapping would look for nltk's own 'wordnet' corpus; this reader *is* 3.0.
            return None

    with tempfile.TemporaryDirectory(prefix="querylog-wordnet-") as tmp:
        if source.origin == "nltk":
            root = source.folder
        else:
            root = Path(tmp) / "wordnet"
            root.mkdir()
            for name in WORDNET_FILES:
                shutil.copyfile(source.folder / name, root / name)
            (root / "lexnames").write_text(lexnames_text(), encoding="utf-8")
        added = str(root.parent)
        nltk.data.path.append(added)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "multilingual functions are not available"
                yield _Reader(str(root), None)
        finally:
            if added in nltk.data.path:
                nltk.data.path.remove(added)
