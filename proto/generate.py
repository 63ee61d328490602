"""Regenerate the Python stubs of proto/ into adapters/grpc/stubs/ (committed).

Usage: ``python proto/generate.py [OUT_ROOT]`` (default: the repository root).
The stubs import as ``adapters.grpc.stubs.querylog.v1.querylog_pb2``. A test regenerates
into a temporary folder and fails when the committed stubs are stale.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ("querylog/v1/querylog.proto",)
PACKAGES = ("adapters/grpc/stubs", "adapters/grpc/stubs/querylog", "adapters/grpc/stubs/querylog/v1")


def generate(out_root: Path = ROOT) -> list[Path]:
    """Run protoc (from grpcio-tools); returns the files written."""
    from grpc_tools import protoc

    out_root.mkdir(parents=True, exist_ok=True)
    well_known = str(resources.files("grpc_tools") / "_proto")
    args = [
        "protoc",
        f"-Iadapters/grpc/stubs={ROOT / 'proto'}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(f"{ROOT / 'proto' / p}" for p in PROTOS),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed")
    written = []
    for pkg in PACKAGES:
        init = out_root / pkg / "__init__.py"
        init.parent.mkdir(parents=True, exist_ok=True)
        if not init.exists():
            init.write_text('"""Generated gRPC/protobuf stubs (proto/generate.py); do not edit."""\n')
        written.append(init)
    for p in PROTOS:
        stem = out_root / "adapters/grpc/stubs" / p[: -len(".proto")]
        written += [Path(f"{stem}_pb2.py"), Path(f"{stem}_pb2.pyi"), Path(f"{stem}_pb2_grpc.py")]
    return written


if __name__ == "__main__":
    for path in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT):
        print(path)
