"""Detection of the CloudEvents in what arrived: a body with its content type or
headers (HTTP's ``ce-`` or Kafka's ``ce_``) that announce one event, in structured
or binary mode, or a CloudEvents batch. Pure: no I/O.

:meth:`~a2a_bus.protocol.adaptor.Adaptor.from_bytes` asks here first; what
announces no CloudEvent is read as JSON-RPC there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import http_codec, kafka_codec
from a2a_bus.protocol.binary import decode_binary
from a2a_bus.protocol.constants import content_type as media_types
from a2a_bus.protocol.errors import ErrorCode, Failure, ProtocolError

#: What one element of the input converts to: an event, or the error to answer with.
Converted = CloudEvent | Failure
Headers = Mapping[str, str | bytes] | Sequence[tuple[str, str | bytes]]


def announced_events(
    body: bytes, content_type: str | None, headers: Headers | None, max_batch: int
) -> list[Converted] | None:
    """The CloudEvents that the content type or ``ce-``/``ce_`` headers announce
    (a batch of at most ``max_batch``); None when they announce none."""
    text_headers = _text_headers(headers)
    if content_type is None:
        content_type = next((v for n, v in text_headers if n == "content-type"), None)
    media = (content_type or "").split(";", 1)[0].strip().lower()
    try:
        if media == media_types.CLOUDEVENT_BATCH:
            return _limit_batch(http_codec.decode_batch(body), max_batch)
        if media.startswith("application/cloudevents"):
            return [http_codec.from_http({"content-type": media}, body)[0]]
        binary = _binary_prefix(text_headers)
        if binary is not None:
            return [_binary(text_headers, body, binary)]
    except ProtocolError as exc:
        return [exc.failure]
    return None


def batch_too_long(length: int, max_batch: int) -> Failure:
    """The error answering a batch of more than ``max_batch`` elements."""
    detail = f"batch has {length} elements; the limit is {max_batch}"
    return Failure(ErrorCode.INVALID_REQUEST, "Invalid Request", None, detail)


def _limit_batch(items: list[Converted], max_batch: int) -> list[Converted]:
    if not items:
        return [Failure(ErrorCode.INVALID_REQUEST, "Invalid Request", None, "empty batch")]
    if len(items) > max_batch:
        return [batch_too_long(len(items), max_batch)]
    return items


def _binary(headers: list[tuple[str, str]], body: bytes, prefix: str) -> CloudEvent:
    if prefix == http_codec.HEADER_PREFIX:
        return http_codec.from_http(dict(headers), body)[0]
    return decode_binary(headers, body, kafka_codec.HEADER_PREFIX, str)


def _binary_prefix(headers: list[tuple[str, str]]) -> str | None:
    for name, _ in headers:
        if name == "ce-specversion":
            return http_codec.HEADER_PREFIX
        if name == "ce_specversion":
            return kafka_codec.HEADER_PREFIX
    return None


def _text_headers(headers: Headers | None) -> list[tuple[str, str]]:
    if headers is None:
        return []
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for name, value in pairs:
        if isinstance(value, bytes):
            try:
                value = value.decode()
            except UnicodeDecodeError:
                continue
        out.append((name.lower(), value))
    return out
