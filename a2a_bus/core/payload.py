"""What one message may carry, the same on every transport.

A message's payload (request params, event data, a handler's result, one
stream chunk) must be JSON, or bytes for event data, and at most
:data:`MAX_PAYLOAD_BYTES` of it; its envelope (the event's attributes, and a
JSON-RPC message's method and id) at most :data:`MAX_ENVELOPE_BYTES`. Kafka
refuses records over 1 MiB; the in-memory transport would carry anything.
Checking both where the message is made keeps a program that works embedded
working on Kafka, and gives the one who can fix it a clear error instead of a
timeout on the other side.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import ErrorCode, JsonRpcError, jsonrpc_of, to_structured
from a2a_bus.protocol.events import adopt_event

#: Bytes of JSON a payload may have: what is left of Kafka's 1 MiB record size
#: (the producer's ``max_request_size``) after a generous allowance for the envelope.
MAX_PAYLOAD_BYTES = 1_000_000

#: Bytes of JSON an envelope may have: the attributes as structured mode writes
#: them, plus a JSON-RPC message's ``method`` and ``id``. A record repeats part
#: of it (the key is an attribute; the bus adds ``a2amethod`` from ``type``, the
#: reply topic, a fresh id), so its worst case is about twice this: 1,000,000 +
#: 2 x 16,384 + ~1 KB of JSON and record framing stay under Kafka's 1,048,576.
MAX_ENVELOPE_BYTES = 16_384


#: The integers orjson writes (64 bits, signed or not); larger ones it refuses.
_INT_MIN, _INT_END = -(1 << 63), 1 << 64


class PayloadError(ValueError):
    """A payload no transport may carry: not JSON, or too large (``too_large``)."""

    def __init__(self, detail: str, *, too_large: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.too_large = too_large


def check_payload(
    value: Any, what: str, *, binary: bool = False, limit: int = MAX_PAYLOAD_BYTES
) -> None:
    """Raise :class:`PayloadError` unless ``value`` travels as JSON (with ``binary``,
    bytes) in at most ``limit`` bytes; ``what`` names it in the detail.

    Bytes are measured as base64, the form JSON (and so Kafka's structured
    content mode, the default) carries them in.
    """
    problem = _problem(value, what, binary, limit)
    if problem is not None:
        raise problem


def _problem(value: Any, what: str, binary: bool, limit: int) -> PayloadError | None:
    """What :func:`check_payload` raises, returned (None: it travels)."""
    kind = type(value)
    if kind is not dict and kind is not list:  # (those are serialised: tested first)
        if value is None or kind is bool or (kind is int and _INT_MIN <= value < _INT_END):
            return None  # the common small results: nothing to serialise to know
        if kind is str and len(value) * 6 <= limit and value.isascii():
            # JSON spends at most 6 bytes on an ASCII character (a \uXXXX escape); other
            # text may hold a lone surrogate, which orjson (and so Kafka) refuses.
            return None
        if binary and isinstance(value, bytes | bytearray):
            size = (len(value) + 2) // 3 * 4
            if size > limit:
                detail = (
                    f"{what} is {size} bytes as base64, more than the {limit} one message may carry"
                )
                return PayloadError(detail, too_large=True)
            return None
    try:
        raw = orjson.dumps(value)
    except TypeError as exc:  # orjson's message names the type
        return PayloadError(f"{what} is not JSON: {exc}")
    # orjson writes a non-finite float as null: only then is the walk worth it.
    if b"null" in raw and (where := _non_finite(value, what)) is not None:
        return PayloadError(f"{where} is not JSON: NaN and infinities have no JSON form")
    if len(raw) > limit:
        detail = f"{what} is {len(raw)} bytes, more than the {limit} one message may carry"
        return PayloadError(detail, too_large=True)
    return None


def refusal(
    value: Any, what: str, *, result: bool = False, binary: bool = False
) -> JsonRpcError | None:
    """The error for ``value`` that no transport carries, or None when it travels.

    For a sender: -32602 when it is not JSON, -32005 ``Request too large``. For a
    handler's ``result`` (or stream item), the caller's answer in its place:
    -32603 when it is not JSON (the handler's fault), -32005 ``Response too large``.
    """
    problem = _problem(value, what, binary, MAX_PAYLOAD_BYTES)
    if problem is None:
        return None
    if problem.too_large:
        message = "Response too large" if result else "Request too large"
        return JsonRpcError(ErrorCode.TOO_LARGE, message, problem.detail)
    if result:
        return JsonRpcError(ErrorCode.INTERNAL_ERROR, "Internal error", problem.detail)
    return JsonRpcError(ErrorCode.INVALID_PARAMS, "Invalid params", problem.detail)


#: Characters of a JSON-RPC error's message carried; the specification asks for
#: "a concise single sentence", and details belong in ``data``.
MAX_ERROR_MESSAGE_CHARS = 4096


def error_message(message: object) -> str:
    """``message`` as an error's message every transport carries: a string (str()
    of anything else), at most :data:`MAX_ERROR_MESSAGE_CHARS` (cut, saying how
    much was left out), and JSON text (a lone surrogate is escaped)."""
    text = message if type(message) is str else str(message)
    if len(text) > MAX_ERROR_MESSAGE_CHARS:
        left_out = len(text) - MAX_ERROR_MESSAGE_CHARS
        text = f"{text[:MAX_ERROR_MESSAGE_CHARS]}... ({left_out} characters left out)"
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def check_envelope(event: CloudEvent, *, limit: int = MAX_ENVELOPE_BYTES) -> None:
    """Raise :class:`PayloadError` unless ``event``'s envelope travels: at most
    ``limit`` bytes of JSON (see :data:`MAX_ENVELOPE_BYTES`), and JSON at all
    (text with a lone surrogate is not)."""
    if not _short(event, limit):
        _measure(event, limit)


def envelope_refusal(event: CloudEvent) -> JsonRpcError | None:
    """The error for a sender whose event's envelope no transport carries, or None:
    -32005 ``Request too large``, -32600 when an attribute is not JSON text."""
    if _short(event, MAX_ENVELOPE_BYTES):
        return None  # nearly every event, on the request path: one call
    try:
        _measure(event, MAX_ENVELOPE_BYTES)
    except PayloadError as exc:
        if exc.too_large:
            return JsonRpcError(ErrorCode.TOO_LARGE, "Request too large", exc.detail)
        return JsonRpcError(ErrorCode.INVALID_REQUEST, "Invalid Request", exc.detail)
    return None


def _short(event: CloudEvent, limit: int) -> bool:
    """True when the lengths alone show the envelope is within ``limit``: its
    names and values (with a JSON-RPC message's method and id) are ASCII text or
    small scalars, whose JSON is at most 6 bytes a character with quotes, colon
    and comma. Attributes are a few short strings, so this settles nearly every
    event without serialising anything."""
    attributes = event.get_attributes()
    try:
        text = "".join((*attributes, *attributes.values()))
    except TypeError:  # a value that is no text: the rare time, sequence number, flag
        chars = 0
        for name, value in attributes.items():
            size = _member_chars(value)
            if size < 0 or not name.isascii():
                return False
            chars += len(name) + size + 1
    else:
        if not text.isascii():
            return False
        chars = len(text) + len(attributes)
    message = jsonrpc_of(event.get_data())
    if message is not None:
        method, id = message.get("method"), message.get("id")
        if (
            type(method) is str
            and method.isascii()
            and type(id) is int
            and _INT_MIN <= id < _INT_END
        ):
            chars += len(method) + 22  # the common request: a name and a counter
        else:
            sizes = (_member_chars(method), _member_chars(id))
            if min(sizes) < 0:
                return False
            chars += sum(sizes) + 2
    return chars * 6 + 2 <= limit


def _measure(event: CloudEvent, limit: int) -> None:
    """:func:`check_envelope` by the exact size of the envelope's JSON."""
    attributes = event.get_attributes()
    message = jsonrpc_of(event.get_data())
    try:
        size = len(orjson.dumps(to_structured(adopt_event(attributes))))
        if message is not None:
            for member in (message.get("method"), message.get("id")):
                # The message's own checks judge a number; only its length counts here.
                size += len(orjson.dumps(member) if type(member) is str else str(member))
    except TypeError as exc:  # orjson's message says what it refused
        raise PayloadError(f"the attributes of {_named(event)} are not JSON: {exc}") from None
    if size > limit:
        members = {**attributes, **({} if message is None else {"method": message.get("method")})}
        largest = max(members, key=lambda name: len(str(members[name])))
        detail = (
            f"the attributes of {_named(event)} are {size} bytes as JSON (the largest is "
            f"{largest!r}), more than the {limit} an event's attributes may carry; "
            "large values belong in its data"
        )
        raise PayloadError(detail, too_large=True)


def _member_chars(value: Any) -> int:
    """Characters bounding ``value``'s JSON at 6 bytes each, or -1 (see :func:`_short`)."""
    kind = type(value)
    if kind is str:
        return len(value) if value.isascii() else -1
    if value is None or kind is bool or (kind is int and _INT_MIN <= value < _INT_END):
        return 20
    if kind is datetime:
        return 40  # RFC 3339 with microseconds and an offset is 32
    return -1


def _named(event: CloudEvent) -> str:
    id = event.get_attributes().get("id")
    if type(id) is str and len(id) <= 64:
        return f"event {id!r}"
    return "the event"


def _non_finite(value: Any, path: str) -> str | None:
    """The path of the first NaN or infinity in ``value``, or None."""
    if type(value) is float:
        return None if math.isfinite(value) else path
    if isinstance(value, dict):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _non_finite(item, f"{path}[{key!r}]")
        if found is not None:
            return found
    return None


__all__ = [
    "MAX_ENVELOPE_BYTES",
    "MAX_PAYLOAD_BYTES",
    "PayloadError",
    "check_envelope",
    "check_payload",
    "envelope_refusal",
    "refusal",
]
