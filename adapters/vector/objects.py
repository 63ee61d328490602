"""A Vector log event as a JSON object, for a schema whose codec reads objects (``format: ubi``).

A UBI record sent by Vector (a ``file`` source tailing UBI JSON lines with a ``parse_json`` remap, an ``http_server``
source decoding JSON) is a log whose map is the record: its keys, nested maps as nested objects, arrays as lists.
The vector source then hands :class:`~sidecar.objectrecords.ObjectRecords` this function, and the UBI codec reads
the objects. Key order is the map's (keys sorted: a protobuf map keeps none, and Vector orders every log's keys);
a timestamp becomes its RFC 3339 text, bytes that are not UTF-8 no JSON text (``not_json``). Bad events:
``invalid_event``, ``unsupported_event``, ``empty_event``, ``log_value_not_map``, as :mod:`adapters.vector.codec`.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError

from adapters.vector.stubs.event_pb2 import EventWrapper
from adapters.vector.values import to_python
from sidecar.api import BadRecord

__all__ = ["log_object"]


def log_object(data: Any) -> dict[str, Any]:
    """The map of a log event (``EventWrapper`` wire bytes or message) as a JSON object; :class:`BadRecord`."""
    if isinstance(data, EventWrapper):
        wrapper = data
    else:
        try:
            wrapper = EventWrapper.FromString(data)
        except (DecodeError, ValueError, TypeError):
            raise BadRecord("invalid_event") from None
    kind = wrapper.WhichOneof("event")
    if kind != "log":
        raise BadRecord("unsupported_event" if kind else "empty_event")
    log = wrapper.log
    if not log.HasField("value"):  # the deprecated Log.fields map
        return {key: to_python(log.fields[key]) for key in sorted(log.fields)}
    if log.value.WhichOneof("kind") != "map":
        raise BadRecord("log_value_not_map")
    record: dict[str, Any] = to_python(log.value)
    return record
