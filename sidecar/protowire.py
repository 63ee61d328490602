"""The protobuf wire format's varint, for sources that read messages field by field (to salvage the good
events of a batch one bad event would otherwise fail whole)."""

from __future__ import annotations


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """A protobuf varint at ``pos``: (value, position after it); ValueError when truncated or too long."""
    value = shift = 0
    end = len(data)
    while pos < end and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise ValueError("bad varint")
