"""One export request into the runtime: split, bounded, received, answered with ``partial_success``.

Shared by the gRPC and HTTP sides of the ``otlp`` source (:mod:`adapters.otlp.server`). :meth:`Exporter.export`
runs on the server host's work (a worker, or the loop for a cheap request while the runtime's lock is free) and
returns only once ``Runtime.receive`` returned: the records are then delivered, in a sink's durable outbox, held
by a filter, dropped by rule or dead-lettered. Rejected records (dead-lettered: too large, no query...) are counted
in the answer with a message of reasons and counts (never a value); the good records of the request go on.
"""

from __future__ import annotations

import json
import operator
import zlib
from collections import Counter
from dataclasses import dataclass

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from adapters.otlp.values import from_hex_ids
from adapters.otlp.wire import Piece, TooMany, split_request
from sidecar.api import Backpressure, Codec, RecordBatch, Runtime

__all__ = ["Exporter", "InvalidRequest", "Outcome", "TooLarge", "TooMany", "decompress", "json_to_protobuf"]

ORIGIN = "otlp:Export"
_LOG = operator.itemgetter(2)  # a Piece's log record bytes


class InvalidRequest(Exception):
    """The request's own framing is broken (garbage protobuf or JSON): dead-lettered, refused, never retried."""


class TooLarge(Exception):
    """The request is larger than ``max_message_bytes`` (as sent or decompressed)."""


@dataclass(frozen=True)
class Outcome:
    """What became of an export: the records rejected and why (reasons and counts only)."""

    accepted: int
    rejected: int
    message: str


def decompress(data: bytes, encoding: str, limit: int) -> bytes:
    """The body of a ``Content-Encoding`` (``gzip``, ``deflate``, ``identity``), at most ``limit`` bytes:
    :class:`TooLarge` past it (a gzip bomb), :class:`InvalidRequest` for a broken stream, ValueError for another
    encoding."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        if len(data) > limit:
            raise TooLarge
        return data
    if encoding not in ("gzip", "deflate"):
        raise ValueError(encoding)
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error:
        raise InvalidRequest from None
    if len(out) > limit:
        raise TooLarge
    if not inflater.eof:
        raise InvalidRequest
    return out


def json_to_protobuf(body: bytes) -> bytes:
    """An OTLP/JSON export request (ids as hex) as protobuf bytes; :class:`InvalidRequest` when it is none."""
    try:
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        from_hex_ids(data)
        request = json_format.ParseDict(data, ExportLogsServiceRequest(), ignore_unknown_fields=True)
    except (ValueError, TypeError, AttributeError, RecursionError, json_format.ParseError):
        raise InvalidRequest from None
    return request.SerializeToString()


class Exporter:
    """Export requests (protobuf bytes) into the runtime (see the module)."""

    def __init__(self, runtime: Runtime, codec: Codec, *, max_records: int, max_record_bytes: int) -> None:
        """``codec``: the otlp codec, or the schema's UBI codec over the records' bodies (adapters.otlp.objects)."""
        self.runtime = runtime
        self.codec = codec
        self.max_records = max_records
        self.max_record_bytes = max_record_bytes

    def export(self, data: bytes) -> Outcome:
        """Hand the request's records to the runtime; the outcome once durable.

        Raises :class:`~sidecar.api.Backpressure` (before anything is taken) when a sink's outbox is full,
        :class:`TooMany` past ``max_records`` and :class:`InvalidRequest` for broken framing (both before any
        record is taken), and whatever ``receive`` raised."""
        full = self.runtime.backpressure()
        if full is not None:
            raise Backpressure(full, "full")
        dead = self.runtime.dead_letters
        try:
            pieces = split_request(data, self.max_records)
        except TooMany:
            raise
        except ValueError:
            dead.add("invalid_request", ORIGIN, None, data if len(data) <= self.max_record_bytes else None)
            dead.flush()
            raise InvalidRequest from None
        reasons: Counter[str] = Counter()
        limit = self.max_record_bytes
        positions: range | list[int] = range(1, len(pieces) + 1)
        if pieces and max(map(len, map(_LOG, pieces))) > limit:
            kept: list[Piece] = []
            places: list[int] = []
            for i, p in enumerate(pieces, 1):
                if len(p.log) > limit:
                    dead.add("record_too_large", ORIGIN, i, None)  # too large to keep in the dead-letter file
                    reasons["record_too_large"] += 1
                else:
                    kept.append(p)
                    places.append(i)
            pieces, positions = kept, places
        if pieces:
            receipt = self.runtime.receive(RecordBatch(pieces, self.codec, ORIGIN, positions))
            reasons.update(receipt.reasons)
            accepted = receipt.accepted
        else:
            dead.flush()
            accepted = 0
        rejected = sum(reasons.values())
        message = ""
        if rejected:
            listed = ", ".join(f"{reason}: {n}" for reason, n in sorted(reasons.items()))
            message = f"{rejected} log records rejected and dead-lettered ({listed})"
        return Outcome(accepted, rejected, message)
