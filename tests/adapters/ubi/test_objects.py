"""A UBI record carried in a Vector log's map or an OTLP log record's body comes back as the same JSON object
(properties over generated objects): OTLP keeps the keys' order, Vector gives them sorted (a protobuf map has none);
a timestamp-free, bytes-free object loses nothing either way. An OTLP body that is a JSON line reads as that line."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from adapters.otlp.objects import log_object as otlp_object
from adapters.otlp.values import set_value as set_any
from adapters.otlp.wire import Piece
from adapters.vector.objects import log_object as vector_object
from adapters.vector.stubs.event_pb2 import EventWrapper
from adapters.vector.values import set_value as set_vector

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
VALUE = st.recursive(
    LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=12
)
RECORD = st.dictionaries(TEXT, VALUE, max_size=6)


def sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(v) for v in value]
    return value


@given(RECORD)
def test_a_vector_log_map_is_the_record_with_its_keys_sorted(record: dict[str, Any]) -> None:
    wrapper = EventWrapper()
    set_vector(wrapper.log.value, record)
    got = vector_object(wrapper.SerializeToString())
    assert json.dumps(got) == json.dumps(sorted_keys(record))


@given(RECORD)
def test_an_otlp_map_body_is_the_record_in_its_order(record: dict[str, Any]) -> None:
    msg = LogRecord()
    set_any(msg.body, record)
    got = otlp_object(Piece(b"", b"", msg.SerializeToString()))
    assert json.dumps(got) == json.dumps(record)  # the same keys in the same order, nested ones too


@given(RECORD)
def test_an_otlp_json_line_body_is_that_line(record: dict[str, Any]) -> None:
    msg = LogRecord()
    msg.body.string_value = json.dumps(record, ensure_ascii=False)
    assert json.dumps(otlp_object(Piece(b"", b"", msg.SerializeToString()))) == json.dumps(record)
