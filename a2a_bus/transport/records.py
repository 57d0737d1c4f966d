"""Turning one record into events (or reasons to dead-letter it), for both transports.

A record (the Kafka shape: value, key, headers; the memory transport stores raw
records so too) is a CloudEvent (binary mode: ``ce_`` headers; structured mode: an
``application/cloudevents+json`` content type) or raw JSON-RPC from any Kafka
producer (a single message or a batch). Anything else is undecodable.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import NamedTuple

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import (
    Adaptor,
    Failure,
    Kind,
    ProtocolError,
    event_kind,
    from_kafka,
    parse_json,
)
from a2a_bus.protocol.kafka_codec import is_structured
from a2a_bus.runtime.tuples import build


class Decoded(NamedTuple):
    """One event of a record, with the key that identifies it across redeliveries."""

    event: CloudEvent
    dedup_key: Hashable
    raw: bool


class DecodedRecord(NamedTuple):
    """The events of a record and the failures to dead-letter."""

    events: Sequence[Decoded] = ()
    failures: Sequence[Failure] = ()


def decode_record(
    adaptor: Adaptor,
    topic: str,
    partition: int,
    offset: int,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes]],
    key: bytes | None,
) -> DecodedRecord:
    """Decode a record; never raises."""
    if value is not None and (is_structured(headers) or _is_cloudevent(headers)):
        try:
            event = from_kafka(value, headers, key)
        except ProtocolError as exc:
            return DecodedRecord(failures=[exc.failure])
        attributes = event.get_attributes()
        decoded = build(Decoded, (event, (attributes["source"], attributes["id"]), False))
        return build(DecodedRecord, ((decoded,), ()))
    if value is None:
        return DecodedRecord(failures=[_invalid("empty record (tombstone)")])
    try:
        message = parse_json(value)
    except ProtocolError as exc:
        return DecodedRecord(failures=[exc.failure])
    raw = _is_jsonrpc(message)
    items = adaptor.from_json(message)
    position = f"{topic}/{partition}/{offset}"
    events: list[Decoded] = []
    failures: list[Failure] = []
    for index, item in enumerate(items):
        if isinstance(item, Failure):
            failures.append(item)
            continue
        if not raw:
            events.append(Decoded(item, (item.get_source(), item.get_id()), False))
            continue
        # Raw JSON-RPC ids are chosen by outside callers and may repeat, so the
        # record's position identifies a raw message, not its id.
        item_position = position if len(items) == 1 else f"{position}/{index}"
        if event_kind(item) is Kind.NOTIFICATION:
            item.get_attributes()["id"] = item_position
        events.append(Decoded(item, ("raw", item_position), True))
    return DecodedRecord(events, failures)


def _is_cloudevent(headers: Sequence[tuple[str, bytes]]) -> bool:
    for name, value in headers:
        lowered = name.lower()
        if lowered == "ce_specversion":
            return True
        if lowered == "content-type" and value.lower().startswith(b"application/cloudevents+json"):
            return True
    return False


def _is_jsonrpc(message: object) -> bool:
    if isinstance(message, dict):
        return "jsonrpc" in message
    if isinstance(message, list):
        return any(isinstance(item, dict) and "jsonrpc" in item for item in message)
    return False


def _invalid(detail: str) -> Failure:
    return Failure(-32600, "Invalid Request", None, detail)


def failure_reason(failures: Sequence[Failure]) -> str:
    """A one-line reason for the ``a2a-dlq-reason`` header."""
    first = failures[0]
    reason = f"undecodable: {first.message}"
    if first.data is not None:
        reason += f" ({first.data})"
    if len(failures) > 1:
        reason += f" and {len(failures) - 1} more"
    return reason
