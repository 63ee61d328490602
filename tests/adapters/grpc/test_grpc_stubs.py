"""The committed stubs in adapters/grpc/stubs match proto/ (regenerated into a temporary folder)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Tool-version stamps differ between grpcio-tools releases without any change of the API.
_VERSION_LINES = re.compile(r"^(# Protobuf Python Version:.*|GRPC_GENERATED_VERSION = .*|    \d+,\s*$)", re.MULTILINE)


def _normalized(path: Path) -> str:
    return _VERSION_LINES.sub("<version>", path.read_text(encoding="utf-8"))


def test_generated_stubs_are_fresh(tmp_path: Path) -> None:
    """Fails when proto/ changed without `python proto/generate.py`."""
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "proto" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = module.generate(tmp_path)
    assert len(written) >= 6
    for fresh in written:
        rel = fresh.relative_to(tmp_path)
        committed = ROOT / rel
        assert committed.is_file(), f"{rel} is missing: run `python proto/generate.py`"
        assert _normalized(committed) == _normalized(fresh), f"{rel} is stale: run `python proto/generate.py`"


def test_stale_stub_would_be_detected(tmp_path: Path) -> None:
    """The comparison is not vacuous: a changed proto gives different stubs."""
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "proto" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    proto = tmp_path / "proto" / "querylog" / "v1"
    proto.mkdir(parents=True)
    text = (ROOT / "proto" / "querylog" / "v1" / "querylog.proto").read_text()
    (proto / "querylog.proto").write_text(text.replace("uint64 seq = 7;", "uint64 seq = 7;\n  string extra = 8;"))
    module.ROOT = tmp_path
    out = tmp_path / "out"
    written = module.generate(out)
    pb2 = next(p for p in written if p.name == "querylog_pb2.py")
    assert _normalized(pb2) != _normalized(ROOT / pb2.relative_to(out))
