"""CloudEvents through a real broker: ``to_kafka`` -> aiokafka -> ``from_kafka``.

The unit tests check the codec on bytes; these check that what the broker and
aiokafka hand back (headers, keys, partitions) still decodes to the same event.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from a2a_bus.protocol import (
    Adaptor,
    CloudEvent,
    ErrorCode,
    Failure,
    ProtocolError,
    ext,
    from_kafka,
    new_event,
    to_kafka,
)
from tests.kafka_records import group_consumer, produce, read

pytestmark = pytest.mark.kafka

MODES = ["binary", "structured"]
ADAPTOR = Adaptor()

CALL = {
    "jsonrpc": "2.0",
    "method": "tools/call",
    "params": {
        "name": "add",
        "arguments": {"a": 1, "b": 2},
        "_agentId": "calculator",
        "_sessionId": "sess-1",
        "_seq": 1,
    },
    "id": 7,
}
STREAM = {
    "jsonrpc": "2.0",
    "method": "message/sendStream",
    "params": {"text": "héllo ✓ 你好", "_sessionId": "sess-1", "_seq": 2},
    "id": "req-8",
}
NOTIFICATION = {"jsonrpc": "2.0", "method": "market/tick", "params": {"_topic": "prices", "p": 1.5}}
RESPONSE = {"jsonrpc": "2.0", "result": {"sum": 3}, "id": 7}
MESSAGES = [CALL, STREAM, NOTIFICATION, RESPONSE]


def events_only(items: list[CloudEvent | Failure]) -> list[CloudEvent]:
    failures = [item for item in items if isinstance(item, Failure)]
    assert not failures, failures
    return [item for item in items if isinstance(item, CloudEvent)]


def sample_events() -> list[CloudEvent]:
    """JSON-RPC turned into events by the adaptor, a reply, and native events."""
    converted = events_only(ADAPTOR.from_bytes(orjson.dumps(MESSAGES), "application/json"))
    structured_input = orjson.dumps(
        {
            "specversion": "1.0",
            "id": "native-1",
            "source": "urn:sensor:7",
            "type": "com.example.reading",
            "time": "2026-11-29T12:30:00.125Z",
            "subject": "prices",
            "targetagent": "echo",
            "seq": 3,
            "collaborationid": "collab-9",
            "datacontenttype": "application/json",
            "data": {"value": 21.5, "unit": "°C"},
        }
    )
    native = events_only(ADAPTOR.from_bytes(structured_input, "application/cloudevents+json"))
    binary = new_event(
        {
            "id": "blob-1",
            "source": "tests",
            "type": "com.example.blob",
            "time": datetime(2026, 11, 29, 8, 0, tzinfo=UTC),
            "datacontenttype": "application/octet-stream",
            ext.PARTITION_KEY: "pk-42",
        },
        bytes(range(256)),
    )
    reply = ADAPTOR.response_event(converted[0], {"jsonrpc": "2.0", "result": 3, "id": 7})
    return [*converted, *native, binary, reply]


async def round_trip(
    bootstrap: str, topic: str, events: list[CloudEvent], mode: str
) -> list[tuple[CloudEvent, Any]]:
    """Send events through the broker; (decoded event, consumer record) pairs."""
    records = [to_kafka(event, mode) for event in events]  # type: ignore[arg-type]
    await produce(bootstrap, topic, ((r.key, r.value, r.headers) for r in records))
    consumer = group_consumer(bootstrap, topic)
    await consumer.start()
    try:
        received = await read(consumer, len(events))
    finally:
        await consumer.stop()
    return [(from_kafka(r.value, list(r.headers), r.key), r) for r in received]


@pytest.mark.parametrize("mode", MODES)
async def test_events_come_back_equal(kafka_bootstrap: str, unique_topic: str, mode: str) -> None:
    events = sample_events()
    decoded = {
        event.get_id(): (event, record)
        for event, record in await round_trip(kafka_bootstrap, unique_topic, events, mode)
    }
    assert sorted(decoded) == sorted(event.get_id() for event in events)
    for sent in events:
        got, record = decoded[sent.get_id()]
        assert got.get_attributes() == sent.get_attributes(), sent.get_id()
        assert got.get_data() == sent.get_data(), sent.get_id()
        assert record.key == to_kafka(sent).key, sent.get_id()


@pytest.mark.parametrize("mode", MODES)
async def test_routing_attributes_and_keys_after_the_broker(
    kafka_bootstrap: str, unique_topic: str, mode: str
) -> None:
    events = sample_events()
    pairs = await round_trip(kafka_bootstrap, unique_topic, events, mode)
    by_id = {event.get_id(): (event, record) for event, record in pairs}

    call, call_record = by_id["7"]
    assert call.get_extension(ext.TARGET_AGENT) == "calculator"
    assert call.get_extension(ext.SEQ) == 1
    assert call.get_extension(ext.SESSION) == "sess-1"
    assert call.get_extension(ext.METHOD) == "tools/call"
    assert call_record.key == b"sess-1"

    stream, stream_record = by_id["req-8"]
    assert stream.get_type().endswith(".message.sendStream.stream")
    assert stream_record.key == b"sess-1"
    # One session, one partition: the two chunks keep their order.
    assert stream_record.partition == call_record.partition
    assert stream_record.offset > call_record.offset

    native, native_record = by_id["native-1"]
    assert native.get_extension(ext.TARGET_AGENT) == "echo"
    assert native.get_extension(ext.SEQ) == 3
    assert native.get_subject() == "prices"
    assert native.get_time() == datetime(2026, 11, 29, 12, 30, 0, 125000, tzinfo=UTC)
    assert native_record.key == b"collab-9"

    blob, blob_record = by_id["blob-1"]
    assert blob.get_data() == bytes(range(256))
    assert blob_record.key == b"pk-42"

    [notification] = [e for e, _ in pairs if e.get_extension(ext.MCPTYPE) == "notification"]
    assert notification.get_subject() == "prices"


async def test_jsonrpc_is_rebuilt_after_the_broker(kafka_bootstrap: str, unique_topic: str) -> None:
    """The adaptor's reverse direction works on what came out of Kafka (id types kept)."""
    events = events_only(ADAPTOR.from_bytes(orjson.dumps(MESSAGES), "application/json"))
    pairs = await round_trip(kafka_bootstrap, unique_topic, events, "binary")
    rebuilt = sorted(
        (ADAPTOR.to_jsonrpc(event) for event, _ in pairs), key=lambda m: orjson.dumps(m)
    )
    assert rebuilt == sorted(MESSAGES, key=lambda m: orjson.dumps(m))


async def test_malformed_records_raise_protocol_errors(
    kafka_bootstrap: str, unique_topic: str
) -> None:
    bad = [
        (None, b"\xff\xfe not an event", []),
        (b"k", b"{not json", [("content-type", b"application/cloudevents+json")]),
        (None, b"{}", [("ce_specversion", b"1.0"), ("ce_type", b"t")]),  # no id, no source
    ]
    await produce(kafka_bootstrap, unique_topic, bad)
    consumer = group_consumer(kafka_bootstrap, unique_topic)
    await consumer.start()
    try:
        received = await read(consumer, len(bad))
    finally:
        await consumer.stop()
    codes = []
    for record in received:
        with pytest.raises(ProtocolError) as caught:
            from_kafka(record.value, list(record.headers), record.key)
        codes.append(caught.value.failure.code)
    assert all(code in (ErrorCode.PARSE_ERROR, ErrorCode.INVALID_REQUEST) for code in codes)
