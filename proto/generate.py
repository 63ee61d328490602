"""Regenerate the Python stubs of proto/ into the adapters' ``stubs`` packages (committed).

Usage: ``python proto/generate.py [OUT_ROOT]`` (default: the repository root).

Each :class:`StubSet` compiles the ``.proto`` files of one folder of proto/ with that folder mounted at the stub
package's path, so the generated modules import by their package path:

* ``proto/querylog/v1/querylog.proto`` -> ``adapters.grpc.stubs.querylog.v1.querylog_pb2`` (our API);
* ``proto/vector/{event,vector}.proto`` -> ``adapters.vector.stubs.{event,vector}_pb2`` (Vector's native
  protocol, written from its published field numbers; ``vector.proto`` imports
  ``"adapters/vector/stubs/event.proto"`` for that reason).

A test regenerates into a temporary folder and fails when the committed stubs are stale. A set whose
``.proto`` files are all absent under ``ROOT`` is skipped (a partial copy of proto/ generates what it has).
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent


class StubSet(NamedTuple):
    """The ``.proto`` files under ``proto/<source>`` compiled into the package folder ``stubs``."""

    source: str
    stubs: str
    protos: tuple[str, ...]
    #: package folders (relative to the output root) that get an ``__init__.py``
    packages: tuple[str, ...]


SETS = (
    StubSet(
        "",
        "adapters/grpc/stubs",
        ("querylog/v1/querylog.proto",),
        ("adapters/grpc/stubs", "adapters/grpc/stubs/querylog", "adapters/grpc/stubs/querylog/v1"),
    ),
    StubSet("vector", "adapters/vector/stubs", ("event.proto", "vector.proto"), ("adapters/vector/stubs",)),
)
# The first set, by its old names (kept for callers of this module).
PROTOS = SETS[0].protos
PACKAGES = SETS[0].packages


def _generate_set(stub: StubSet, out_root: Path, well_known: str) -> list[Path]:
    from grpc_tools import protoc

    folder = ROOT / "proto" / stub.source if stub.source else ROOT / "proto"
    if not any((folder / p).is_file() for p in stub.protos):
        return []
    args = [
        "protoc",
        f"-I{stub.stubs}={folder}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(f"{folder / p}" for p in stub.protos),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {folder}")
    written = []
    for pkg in stub.packages:
        init = out_root / pkg / "__init__.py"
        init.parent.mkdir(parents=True, exist_ok=True)
        if not init.exists():
            init.write_text('"""Generated gRPC/protobuf stubs (proto/generate.py); do not edit."""\n')
        written.append(init)
    for p in stub.protos:
        stem = out_root / stub.stubs / p[: -len(".proto")]
        written += [Path(f"{stem}_pb2.py"), Path(f"{stem}_pb2.pyi"), Path(f"{stem}_pb2_grpc.py")]
    return written


def generate(out_root: Path = ROOT) -> list[Path]:
    """Run protoc (from grpcio-tools) for every stub set; returns the files written."""
    out_root.mkdir(parents=True, exist_ok=True)
    well_known = str(resources.files("grpc_tools") / "_proto")
    written: list[Path] = []
    for stub in SETS:
        written += _generate_set(stub, out_root, well_known)
    return written


if __name__ == "__main__":
    for path in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT):
        print(path)
