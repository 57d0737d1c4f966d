"""The CloudEvents HTTP binding: binary, structured and batched content modes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal
from urllib.parse import quote, unquote

import orjson
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol.binary import CONTENT_TYPE_HEADER, decode_binary, encode_binary
from a2a_bus.protocol.constants import content_type
from a2a_bus.protocol.errors import Failure, ProtocolError
from a2a_bus.protocol.events import check_strings
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


# RFC 7230's quoted-string (older senders quote values with spaces); a percent sign
# that starts no %XY escape.
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_QUOTED_PAIR = re.compile(r"\\(.)")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _quote(text: str) -> str:
    return quote(text, safe=_SAFE)


def _unquote(value: str) -> str:
    """Header text back to the attribute's text, as the binding's section 3.1.3.2 says:
    a double-quoted value unescaped, then one round of percent-decoding.

    Raises :class:`ValueError` (the caller names the header) for what the binding
    does not let through: a character that is not printable ASCII (the rest must
    be percent-encoded), a ``%`` that starts no escape, escapes that are not UTF-8.
    Unneeded escapes and lowercase hex are accepted, as the binding asks.
    """
    if not (value.isascii() and value.isprintable()):
        raise ValueError("holds a character that is not printable ASCII: percent-encode it")
    quoted = _QUOTED.fullmatch(value)
    if quoted is not None:
        value = _QUOTED_PAIR.sub(r"\1", quoted.group(1))
    if "%" not in value:
        return value
    bad = _BAD_ESCAPE.search(value)
    if bad is not None:
        raise ValueError(f"has a '%' that starts no %XY escape at {value[bad.start() :][:6]!r}")
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        raise ValueError("percent-encodes bytes that are not UTF-8") from None


def _checked(event: CloudEvent) -> CloudEvent:
    """``event``, once its strings are known to hold no control character."""
    check_strings(event.get_attributes())
    return event


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
            out.append(_checked(from_structured(item)))
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
        return [_checked(load_structured(body))]
    if kind is not None and kind.startswith("application/cloudevents"):
        raise ProtocolError.invalid(f"unsupported event format {kind!r}")
    if not any(name.lower() == HEADER_PREFIX + "specversion" for name in headers):
        raise ProtocolError.invalid(
            "not a CloudEvent: no ce-specversion header and not a cloudevents content type"
        )
    return [_checked(decode_binary(headers.items(), body, HEADER_PREFIX, _unquote))]
