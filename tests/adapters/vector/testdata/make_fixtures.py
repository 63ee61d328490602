"""Build the PushEventsRequest fixtures (``fixtures/*.bin``) from their readable descriptions (``fixtures/*.json``).

Usage: ``python tests/adapters/vector/testdata/make_fixtures.py`` (rewrites every ``.bin``; a test fails when
one is stale). Each JSON file describes one request, event by event, in the shape of Vector's ``event.proto``
with one readable key per ``Value`` kind:

    {"raw_bytes": "text"}  {"raw_bytes_hex": "ff00"}  {"timestamp": {"seconds": 1, "nanos": 2}}
    {"integer": 5}  {"float": 1.5}  {"float": "-0.0"}  {"boolean": true}  {"null": null}
    {"map": {"key": VALUE, ...}}  {"array": [VALUE, ...]}

An event is ``{"log": {"value": VALUE, "fields": {"key": VALUE}, "metadata": VALUE, "metadata_full_hex": "..."}}``
(each part optional; ``metadata_full_hex`` are raw bytes of Vector's Metadata message, which our proto does not
declare), ``{"metric_hex": "..."}`` or ``{"trace_hex": "..."}`` (raw message bytes), or ``{"raw_hex": "..."}``
(an event's bytes as they are, garbage included). ``expect`` says what the sidecar makes of the request; the
tests read it. Serialization is deterministic (map keys in order, as Vector writes them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[4]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def value(spec: dict[str, Any]) -> Any:
    from adapters.vector.stubs.event_pb2 import NULL_VALUE, Value

    ((kind, x),) = spec.items()
    v = Value()
    if kind == "raw_bytes":
        v.raw_bytes = x.encode("utf-8")
    elif kind == "raw_bytes_hex":
        v.raw_bytes = bytes.fromhex(x)
    elif kind == "timestamp":
        v.timestamp.SetInParent()
        v.timestamp.seconds = x["seconds"]
        v.timestamp.nanos = x.get("nanos", 0)
    elif kind == "integer":
        v.integer = x
    elif kind == "float":
        v.float = float(x)
    elif kind == "boolean":
        v.boolean = x
    elif kind == "null":
        v.null = NULL_VALUE
    elif kind == "map":
        v.map.SetInParent()
        for key, item in x.items():
            v.map.fields[key].CopyFrom(value(item))
    elif kind == "array":
        v.array.SetInParent()
        for item in x:
            v.array.items.add().CopyFrom(value(item))
    else:
        raise ValueError(f"unknown value kind {kind}")
    return v


def event(spec: dict[str, Any]) -> bytes:
    from adapters.vector.stubs.event_pb2 import EventWrapper

    if "raw_hex" in spec:
        return bytes.fromhex(spec["raw_hex"])
    w = EventWrapper()
    if "metric_hex" in spec:
        w.metric.MergeFromString(bytes.fromhex(spec["metric_hex"]))
        w.metric.SetInParent()
    elif "trace_hex" in spec:
        w.trace.MergeFromString(bytes.fromhex(spec["trace_hex"]))
        w.trace.SetInParent()
    else:
        log = spec["log"]
        w.log.SetInParent()
        if "value" in log:
            w.log.value.CopyFrom(value(log["value"]))
        for key, item in log.get("fields", {}).items():
            w.log.fields[key].CopyFrom(value(item))
        if "metadata" in log:
            w.log.metadata.CopyFrom(value(log["metadata"]))
        if "metadata_full_hex" in log:
            w.log.metadata_full.MergeFromString(bytes.fromhex(log["metadata_full_hex"]))
    data: bytes = w.SerializeToString(deterministic=True)
    return data


def build(description: Path) -> bytes:
    """The request bytes a description names."""
    from adapters.vector.codec import frame

    spec = json.loads(description.read_text(encoding="utf-8"))
    return frame([event(e) for e in spec["events"]])


def main() -> None:
    for description in sorted(FIXTURES.glob("*.json")):
        target = description.with_suffix(".bin")
        target.write_bytes(build(description))
        print(target.relative_to(ROOT))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
