"""The CloudEvents Kafka binding: binary and structured content modes.

The record key is the ``partitionkey`` attribute when the event has one, else the
stream's ``sessionid``, else the ``collaborationid``, so every chunk of a stream and
every message of a collaboration lands in one partition, in order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol.binary import (
    CONTENT_TYPE_HEADER,
    attribute_text,
    decode_binary,
    encode_binary,
)
from a2a_bus.protocol.constants import content_type, ext
from a2a_bus.protocol.errors import ProtocolError
from a2a_bus.protocol.formats import dump_structured, load_structured

HEADER_PREFIX = "ce_"
_STRUCTURED = content_type.CLOUDEVENT.encode()
#: The one header of a record written in structured mode (read without a scan).
STRUCTURED_HEADER = (CONTENT_TYPE_HEADER, _STRUCTURED)
Mode = Literal["binary", "structured"]
KafkaHeaders = Sequence[tuple[str, bytes]]


class KafkaRecord(NamedTuple):
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


_PARTITION_KEY, _SESSION, _COLLABORATION = ext.PARTITION_KEY, ext.SESSION, ext.COLLABORATION


def record_key(event: CloudEvent) -> bytes | None:
    """The partitioning key the bus uses for ``event``."""
    return key_of(event.get_attributes())


def key_of(attributes: Mapping[str, Any]) -> bytes | None:
    """:func:`record_key` of an event's attributes (for code that holds them already)."""
    # Spelled out rather than a loop over the names: every event sent is keyed.
    value = attributes.get(_PARTITION_KEY)
    if value is None:
        value = attributes.get(_SESSION)
        if value is None:
            value = attributes.get(_COLLABORATION)
            if value is None:
                return None
    return (value if type(value) is str else attribute_text(value)).encode()


def is_structured(headers: KafkaHeaders) -> bool:
    """True for exactly the headers structured mode writes (the common record)."""
    return len(headers) == 1 and headers[0] == STRUCTURED_HEADER


def to_kafka(event: CloudEvent, mode: Mode = "binary", key: bytes | None = None) -> KafkaRecord:
    """The Kafka record that carries ``event``, keyed by ``key`` if given, else by
    :func:`record_key`."""
    if key is None:
        key = record_key(event)
    if mode == "structured":
        return KafkaRecord(key, dump_structured(event), [STRUCTURED_HEADER])
    headers, body = encode_binary(event, HEADER_PREFIX, str.encode)
    return KafkaRecord(key, body, headers)


def _media_type(headers: KafkaHeaders) -> str:
    for name, value in headers:
        if name.lower() == CONTENT_TYPE_HEADER:
            try:
                return value.decode().split(";", 1)[0].strip().lower()
            except UnicodeDecodeError:
                raise ProtocolError.invalid("the content-type header is not valid UTF-8") from None
    return ""


def from_kafka(value: bytes, headers: KafkaHeaders | None, key: bytes | None = None) -> CloudEvent:
    """Decode a record in either content mode; raises :class:`ProtocolError`.

    The mode follows the ``content-type`` header as the binding says; ``ce_`` headers
    beside a structured content type do not make a record binary. A UTF-8 key that
    the attributes do not explain becomes the ``partitionkey`` attribute.
    """
    headers = headers or ()
    kind = content_type.CLOUDEVENT if is_structured(headers) else _media_type(headers)
    if kind == content_type.CLOUDEVENT:
        event = load_structured(value)
    elif kind.startswith("application/cloudevents"):
        raise ProtocolError.invalid(f"unsupported event format {kind!r}")
    else:
        event = decode_binary(headers, value, HEADER_PREFIX, bytes.decode)
    if key is not None and record_key(event) != key:
        # An opaque binary key partitions the record but names no attribute.
        with contextlib.suppress(UnicodeDecodeError):
            event.get_attributes()[ext.PARTITION_KEY] = key.decode()
    return event
