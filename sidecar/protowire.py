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


def scan_field(data: bytes, number: int, max_count: int, max_size: int) -> tuple[int, bool]:
    """A look at a message's top-level fields before it is parsed: how many times the length-delimited field
    ``number`` occurs (outside groups), and whether one of them is longer than ``max_size`` bytes.

    The scan stops once the count passes ``max_count`` (it returns ``max_count + 1`` then), and as well once the
    fields of any number pass ``2 * max_count + 16`` (the same answer: a message of that many fields is refused
    like one of that many events). It allocates nothing per field. A broken framing ends it with what was seen
    so far: the parser that follows reports the framing.
    """
    tag = number << 3 | 2
    one_byte = tag if tag < 0x80 else -1
    count = fields = depth = 0  # depth: inside how many groups (their fields are not the message's own)
    big = False
    most = 2 * max_count + 16
    pos, end = 0, len(data)
    try:
        while pos < end:
            fields += 1
            if fields > most:
                return max_count + 1, big
            if data[pos] == one_byte:  # the common case: the field's tag is one byte
                key, pos = tag, pos + 1
            else:
                key, pos = read_varint(data, pos)
            wire = key & 7
            if wire == 2:
                size, pos = read_varint(data, pos)
                pos += size
                if key == tag and not depth:
                    count += 1
                    if count > max_count:
                        return count, big
                    big = big or size > max_size
            elif wire == 0:
                _, pos = read_varint(data, pos)
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            elif wire == 3:
                depth += 1
            elif wire == 4 and depth:
                depth -= 1
            else:  # broken framing: left to the parser
                return count, big
    except ValueError:
        pass
    return count, big
