"""The CloudEvents HTTP binding: binary, structured and batched content modes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal
from urllib.parse import quote, unquote

import orjson
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol.binary import CONTENT_TYPE_HEADER, decode_binary, encode_binary
from a2a_bus.protocol.constants import content_type
from a2a_bus.protocol.errors import Failure, ProtocolError
from a2a_bus.protocol.formats import (
    dump_structured,
    from_structured,
    load_structured,
    to_structured,
)
from a2a_bus.protocol.parsing import parse_json

HEADER_PREFIX = "ce-"
Mode = Literal["binary", "structured"]
# The HTTP binding percent-encodes space, double quote, percent and anything not printable ASCII.
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"%')


def _quote(text: str) -> str:
    return quote(text, safe=_SAFE)


def to_http(event: CloudEvent, mode: Mode = "binary") -> tuple[dict[str, str], bytes]:
    """Headers and body of an HTTP message carrying ``event``."""
    if mode == "structured":
        return {CONTENT_TYPE_HEADER: content_type.CLOUDEVENT}, dump_structured(event)
    headers, body = encode_binary(event, HEADER_PREFIX, _quote)
    return dict(headers), body


def to_http_batch(events: Sequence[CloudEvent]) -> tuple[dict[str, str], bytes]:
    """Headers and body of a batched-mode message (a JSON array of events)."""
    body = orjson.dumps([to_structured(event) for event in events])
    return {CONTENT_TYPE_HEADER: content_type.CLOUDEVENT_BATCH}, body


def media_type(headers: Mapping[str, str]) -> str | None:
    """The content type without parameters, lowercased; header names are case-insensitive."""
    for name, value in headers.items():
        if name.lower() == CONTENT_TYPE_HEADER:
            return value.split(";", 1)[0].strip().lower()
    return None


def decode_batch(body: bytes) -> list[CloudEvent | Failure]:
    """Each element of a batch becomes an event or its own failure."""
    items = parse_json(body)
    if type(items) is not list:
        raise ProtocolError.invalid("a CloudEvents batch must be a JSON array")
    out: list[CloudEvent | Failure] = []
    for item in items:
        try:
            out.append(from_structured(item))
        except ProtocolError as exc:
            out.append(exc.failure)
    return out


def from_http(headers: Mapping[str, str], body: bytes) -> list[CloudEvent]:
    """Decode an HTTP message in any content mode; raises :class:`ProtocolError`.

    The mode follows the content type, as the binding says: a structured or batched
    message may carry ``ce-`` headers too, and they do not make it binary.
    """
    kind = media_type(headers)
    if kind == content_type.CLOUDEVENT_BATCH:
        events = decode_batch(body)
        for position, item in enumerate(events):
            if isinstance(item, Failure):
                raise ProtocolError(
                    Failure(item.code, item.message, None, f"batch element {position}: {item.data}")
                )
        return events  # type: ignore[return-value]
    if kind == content_type.CLOUDEVENT:
        return [load_structured(body)]
    if kind is not None and kind.startswith("application/cloudevents"):
        raise ProtocolError.invalid(f"unsupported event format {kind!r}")
    if not any(name.lower() == HEADER_PREFIX + "specversion" for name in headers):
        raise ProtocolError.invalid(
            "not a CloudEvent: no ce-specversion header and not a cloudevents content type"
        )
    return [decode_binary(headers.items(), body, HEADER_PREFIX, unquote)]
