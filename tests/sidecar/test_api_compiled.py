"""sidecar.api.compiled: a module counts as compiled only when it was loaded from an extension module built from
the source beside it (the digest setup.py writes), whatever order the files were written in."""

from __future__ import annotations

import hashlib
import os
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from sidecar.api.compiled import DIGEST_SUFFIX, compiled_and_current

SOURCE = b"def f() -> int:\n    return 1\n"


def build(tmp_path: Path, *, source: bytes | None = SOURCE, digest_of: bytes | None = SOURCE) -> str:
    """A module ``mod`` in tmp_path: its extension file (its __file__), its source, the digest of ``digest_of``."""
    module_file = tmp_path / f"mod{EXTENSION_SUFFIXES[0]}"
    module_file.write_bytes(b"\x7fELF")
    if source is not None:
        (tmp_path / "mod.py").write_bytes(source)
    if digest_of is not None:
        (tmp_path / f"mod{DIGEST_SUFFIX}").write_text(hashlib.sha256(digest_of).hexdigest() + "\n")
    return str(module_file)


def test_a_build_of_the_source_beside_it_is_current_even_written_before_it(tmp_path: Path) -> None:
    """pip writes a wheel's files in name order: scan.cpython-*.so, then scan.py (newer). Still current."""
    module_file = build(tmp_path)
    os.utime(module_file, ns=(1_000_000_000, 1_000_000_000))
    assert compiled_and_current(module_file)


def test_a_build_of_another_source_is_not_current_even_when_newer(tmp_path: Path) -> None:
    """An edited source whose C did not rebuild, or a build of an older source: the digest says so."""
    module_file = build(tmp_path, digest_of=SOURCE + b"# edited\n")
    os.utime(tmp_path / "mod.py", ns=(1_000_000_000, 1_000_000_000))
    assert not compiled_and_current(module_file)
    (tmp_path / f"mod{DIGEST_SUFFIX}").write_bytes(b"\xff\xfe")  # garbage in the digest file: not current
    assert not compiled_and_current(module_file)


def test_interpreted_is_not_compiled(tmp_path: Path) -> None:
    build(tmp_path)
    assert not compiled_and_current(str(tmp_path / "mod.py"))
    assert not compiled_and_current(str(tmp_path / "__pycache__" / "mod.cpython-311.pyc"))


def test_without_a_digest_the_build_must_not_be_older_than_the_source(tmp_path: Path) -> None:
    """A build by hand (``mypyc mod.py``) writes no digest: file times decide."""
    module_file = build(tmp_path, digest_of=None)
    os.utime(tmp_path / "mod.py", ns=(1_000_000_000, 1_000_000_000))
    os.utime(module_file, ns=(2_000_000_000, 2_000_000_000))
    assert compiled_and_current(module_file)
    os.utime(tmp_path / "mod.py", ns=(3_000_000_000, 3_000_000_000))
    assert not compiled_and_current(module_file)


def test_a_build_without_its_source_is_all_there_is(tmp_path: Path) -> None:
    assert compiled_and_current(build(tmp_path, source=None, digest_of=None))


def test_the_otlp_scanner_asks_it() -> None:
    """adapters/otlp/scan.py (in pyproject.toml [tool.querylog] compiled) decides COMPILED with this function."""
    from adapters.otlp import scan

    assert compiled_and_current(scan.__file__) == scan.COMPILED
