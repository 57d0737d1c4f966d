"""Read positions of a topic and their cursor form. Pure: no I/O.

A position is the next offset to read per partition of one topic. For the HTTP
and LLM surfaces it travels as a cursor: a short URL-safe string that also
carries a checksum of the topic name, so a cursor handed to another subject is
refused instead of silently reading from unrelated offsets, and a checksum of
itself, so a damaged or cut one is refused too.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping

#: Next offset to read, per partition number.
Position = Mapping[int, int]

MAX_LIMIT = 1000


def check_limit(limit: object) -> int:
    """``limit`` if it is an int in 1..MAX_LIMIT, else ValueError."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}, not {limit!r}")
    return limit


def check_partitions(position: Position, partitions: int, topic: str) -> None:
    """ValueError when ``position`` names a partition ``topic`` does not have."""
    missing = sorted(p for p in position if not 0 <= p < partitions)
    if missing:
        raise ValueError(
            f"invalid cursor: topic {topic!r} has {partitions} partition(s), "
            f"the cursor names partition {missing[0]}"
        )


def encode_cursor(topic: str, position: Position) -> str:
    """The cursor of ``position`` on ``topic``."""
    pairs = ",".join(f"{p}:{o}" for p, o in sorted(position.items()))
    text = f"{_crc(topic)};{pairs}"
    text += f";{_crc(text)}"  # a damaged or cut cursor is refused, not misread
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def parse_cursor(topic: str, cursor: str) -> dict[int, int]:
    """The position a cursor of ``topic`` stands for; ValueError when it is malformed
    or belongs to another topic."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > 4096:
        raise ValueError("invalid cursor: expected a cursor returned by an earlier read")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.b64decode(padded, altchars=b"-_", validate=True).decode("ascii")
        body, _, check = text.rpartition(";")
        if check != _crc(body):
            raise ValueError(check)
        fingerprint, _, pairs = body.partition(";")
        position: dict[int, int] = {}
        for pair in pairs.split(",") if pairs else ():
            partition, _, offset = pair.partition(":")
            if not (partition.isdigit() and offset.isdigit()) or int(partition) in position:
                raise ValueError(pair)
            position[int(partition)] = int(offset)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValueError("invalid cursor: not a cursor returned by an earlier read") from None
    if fingerprint != _crc(topic):
        raise ValueError(f"invalid cursor: it belongs to a read of another topic than {topic!r}")
    return position


def _crc(text: str) -> str:
    return format(zlib.crc32(text.encode()), "08x")
