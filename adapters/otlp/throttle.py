"""OTLP/gRPC throttling: the ``google.rpc.RetryInfo`` a throttling server sends with its error.

The OTLP specification has a throttled gRPC server answer ``RESOURCE_EXHAUSTED`` or ``UNAVAILABLE`` with a
``RetryInfo``: the client waits ``retry_delay`` before it sends again (HTTP's ``Retry-After``). It travels in one
of two trailers: ``grpc-status-details-bin``, a ``google.rpc.Status`` whose details hold it (gRPC's rich error
model: Go's ``status.WithDetails``, the Collector), or ``google.rpc.retryinfo-bin``, the ``RetryInfo`` itself (what
the OpenTelemetry Python SDK's exporter reads). Both are read, and both are sent. The messages are small and
fixed (``Status {3: repeated Any}``, ``Any {1: type_url, 2: value}``, ``RetryInfo {1: Duration}``,
``Duration {1: seconds, 2: nanos}``), read and written here on the wire with :mod:`adapters.otlp.wire`'s field
walker, so the sink needs no further protobuf package.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from adapters.otlp.wire import message_fields, varint

__all__ = ["DETAILS_KEY", "RETRY_INFO", "RETRY_INFO_KEY", "retry_delay", "status_details", "throttle_trailers"]

DETAILS_KEY = "grpc-status-details-bin"
RETRY_INFO_KEY = "google.rpc.retryinfo-bin"
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
#: a delay past this is not a delay a peer means (a broken or hostile value): ignored
_MOST_SECONDS = 86_400.0


def _duration(data: bytes) -> float:
    seconds = nanos = 0
    for number, value in message_fields(data):
        if number == 1 and isinstance(value, int):
            seconds = value - (1 << 64) if value >= 1 << 63 else value  # int64
        elif number == 2 and isinstance(value, int):
            nanos = value - (1 << 64) if value >= 1 << 63 else value  # int32, sign-extended on the wire
    return seconds + nanos / 1e9


def _retry_info(details: bytes) -> float | None:
    """The ``retry_delay`` of a ``RetryInfo`` (seconds), or None when it has none."""
    for number, value in message_fields(details):
        if number == 1 and isinstance(value, bytes):
            return _duration(value)
    return None


def _from_status(status: bytes) -> float | None:
    """The ``retry_delay`` of the first ``RetryInfo`` among a ``google.rpc.Status``'s details."""
    for number, detail in message_fields(status):
        if number != 3 or not isinstance(detail, bytes):
            continue
        type_url, payload = "", b""
        for n, v in message_fields(detail):  # google.protobuf.Any
            if n == 1 and isinstance(v, bytes):
                type_url = v.decode("utf-8", "replace")
            elif n == 2 and isinstance(v, bytes):
                payload = v
        if type_url == RETRY_INFO:
            return _retry_info(payload)
    return None


def retry_delay(trailing_metadata: Iterable[Any] | None) -> float | None:
    """The ``retry_delay`` (seconds) of the ``RetryInfo`` in an error's trailing metadata (either trailer); None
    when there is none, it is negative, longer than a day, or its framing is broken."""
    for item in trailing_metadata or ():
        key, value = item[0], item[1]
        if key not in (DETAILS_KEY, RETRY_INFO_KEY) or not isinstance(value, bytes):
            continue
        try:
            delay = _from_status(value) if key == DETAILS_KEY else _retry_info(value)
        except ValueError:
            continue
        if delay is not None and 0 <= delay <= _MOST_SECONDS:
            return delay
    return None


def _len_field(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + varint(len(payload)) + payload


def _retry_info_bytes(delay_seconds: int) -> bytes:
    duration = b"\x08" + varint(delay_seconds) if delay_seconds > 0 else b""
    return _len_field(0x0A, duration)  # RetryInfo {1: retry_delay}


def status_details(code: int, message: str, delay_seconds: int) -> bytes:
    """A ``google.rpc.Status`` of ``code`` and ``message`` carrying a ``RetryInfo`` of ``delay_seconds``: the value
    of the ``grpc-status-details-bin`` trailer of a throttling answer."""
    any_value = _len_field(0x0A, RETRY_INFO.encode("ascii")) + _len_field(0x12, _retry_info_bytes(delay_seconds))
    head = (b"\x08" + varint(code) if code else b"") + (_len_field(0x12, message.encode("utf-8")) if message else b"")
    return head + _len_field(0x1A, any_value)


def throttle_trailers(code: int, message: str, delay_seconds: int) -> tuple[tuple[str, bytes], ...]:
    """The trailers of a throttling answer: the ``RetryInfo`` in the status details and on its own."""
    return (
        (DETAILS_KEY, status_details(code, message, delay_seconds)),
        (RETRY_INFO_KEY, _retry_info_bytes(delay_seconds)),
    )
