"""An OTLP log record as a JSON object, for a schema whose codec reads objects (``format: ubi``).

Where a UBI record sits in a log record (decided here, documented in docs/STACK.md):

* the **body** as a map (``kvlist_value``): what an OpenTelemetry logger or the Events API sends for a structured
  event; keys in the order sent, nested maps as nested objects, arrays as lists;
* the **body** as a string holding one JSON object: the line itself, as the Collector's ``filelog`` receiver sends
  a tailed UBI ``.jsonl`` file (its ``json_parser`` leaves the line in the body);
* **no body**: the record's attributes are the record (a pipeline that parsed the line into attributes and
  dropped the body); every attribute becomes a key, so an attribute the pipeline added (``log.file.name``) is a
  field of the record (``schema.fields`` gives it a policy).

The record's resource, scope, timestamps, severity and trace ids are not part of a UBI record and are not kept:
a sink writes the UBI record. Bad records: ``invalid_log_record``, ``body_not_object`` (a body of another kind, a
string that is no JSON object), ``invalid_json``, ``json_too_deep``; bytes values are no JSON (``not_json``, from
the UBI codec).
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from adapters.otlp.codec import OtlpCodec
from adapters.otlp.values import to_python
from adapters.otlp.wire import Piece
from sidecar.api import BadRecord, BuildContext, Codec
from sidecar.objectrecords import ObjectRecords, reads_objects

__all__ = ["log_object", "source_codec"]


def source_codec(ctx: BuildContext) -> Codec:
    """The codec of received log records: the otlp codec (roles by ``schema.roles``), or, when the schema's format
    reads JSON objects (``format: ubi``), that codec reading each record's :func:`log_object`."""
    own = ctx.codec_for(ctx.schema.format) if ctx.schema is not None else None
    if own is not None and reads_objects(own):
        return ObjectRecords(own, log_object)
    return OtlpCodec(ctx.schema)


def log_object(piece: Piece) -> dict[str, Any]:
    """The UBI record of a log record (see the module); :class:`BadRecord` when it holds none."""
    try:
        msg = LogRecord.FromString(piece.log)
    except (DecodeError, ValueError, TypeError):
        raise BadRecord("invalid_log_record") from None
    if not msg.HasField("body"):
        return {kv.key: to_python(kv.value) for kv in msg.attributes}
    kind = msg.body.WhichOneof("value")
    if kind == "kvlist_value":
        record: dict[str, Any] = to_python(msg.body)
        return record
    if kind == "string_value" and msg.body.string_value.lstrip().startswith("{"):
        try:
            parsed = json.loads(msg.body.string_value)
        except ValueError:
            raise BadRecord("invalid_json") from None
        except RecursionError:
            raise BadRecord("json_too_deep") from None
        if isinstance(parsed, dict):
            return parsed
    raise BadRecord("body_not_object")
