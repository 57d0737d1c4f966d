"""``Transport.dead_letter``: one contract and one header codec on both transports,
and the transport errors the core turns into JSON-RPC errors."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaProducer

from a2a_bus.core.errors import transport_refusal
from a2a_bus.protocol import ErrorCode, Failure, new_event
from a2a_bus.transport.base import DeadLetter, Delivery, Transport, Undecodable
from a2a_bus.transport.dead_letters import (
    DLQ_ERROR,
    DLQ_REASON,
    DLQ_SOURCE_OFFSET,
    DLQ_SOURCE_PARTITION,
    DLQ_SOURCE_TOPIC,
    DeadLetterLog,
    dead_letter_headers,
    delivered_letter,
)
from a2a_bus.transport.errors import NotDelivered, RecordTooLarge, TransportError
from a2a_bus.transport.kafka.producing import KafkaRecordTooLarge
from a2a_bus.transport.kafka.transport import KafkaTransport
from a2a_bus.transport.memory.transport import MemoryTransport

WAIT = 30.0  # a guard against hangs, never a performance limit


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[Transport]:
    dlq = f"test.dlq.{uuid.uuid4().hex[:10]}"
    made: Transport
    if request.param == "memory":
        made = MemoryTransport(dlq_topic=dlq)
    else:
        made = KafkaTransport(request.getfixturevalue("kafka_bootstrap"), dlq_topic=dlq)
    async with made:
        yield made


async def _first_dead_letter(transport: Transport, dlq: str) -> Delivery:
    """Subscribe to the dead-letter topic from its start and take its first record."""
    got: asyncio.Future[Delivery] = asyncio.get_running_loop().create_future()

    async def take(delivery: Delivery) -> None:
        if not got.done():
            got.set_result(delivery)

    subscription = await transport.subscribe(
        [dlq], f"g.{uuid.uuid4().hex[:8]}", take, from_beginning=True
    )
    try:
        return await asyncio.wait_for(got, WAIT)
    finally:
        await subscription.stop()


def _dlq_of(transport: Transport) -> str:
    if isinstance(transport, KafkaTransport):
        return transport.settings.dlq_topic
    assert isinstance(transport, MemoryTransport)
    return transport.dlq_topic


async def test_a_dead_letter_keeps_the_event_and_says_why_and_where_from(
    transport: Transport,
) -> None:
    event = new_event({"type": "orders.created", "source": "tests"}, {"n": 1})
    delivery = Delivery(event, "orders", 3, 41, b"k", headers=(("trace", b"t1"),))
    letter = delivered_letter(delivery, "handler-error: boom", [("a2a-agent", b"calc")])
    await transport.dead_letter(letter)

    dead = await _first_dead_letter(transport, _dlq_of(transport))
    headers = dict(dead.headers)
    assert dead.event.get_id() == event.get_id()
    assert dead.event.get_data() == {"n": 1}
    assert dead.key == b"k"
    assert headers[DLQ_REASON] == b"handler-error: boom"
    assert headers[DLQ_SOURCE_TOPIC] == b"orders"
    assert headers[DLQ_SOURCE_PARTITION] == b"3"
    assert headers[DLQ_SOURCE_OFFSET] == b"41"
    assert headers["trace"] == b"t1"
    assert headers["a2a-agent"] == b"calc"
    assert transport.dead_lettered == 1


async def test_an_undecodable_record_is_dead_lettered_with_its_errors(
    transport: Transport,
) -> None:
    failure = Failure(-32700, "Parse error", None, "not JSON")
    letter = DeadLetter("ingress", 0, 7, b"{not json", None, (), "undecodable", (failure,))
    await transport.dead_letter(letter)

    dlq = _dlq_of(transport)
    seen: list[Delivery | Undecodable] = []
    got = asyncio.Event()

    async def never(delivery: Delivery) -> None:
        seen.append(delivery)

    async def undecodable(record: Undecodable) -> None:
        seen.append(record)
        got.set()

    subscription = await transport.subscribe(
        [dlq],
        f"g.{uuid.uuid4().hex[:8]}",
        never,
        from_beginning=True,
        on_undecodable=undecodable,
        dead_letter=False,
    )
    try:
        await asyncio.wait_for(got.wait(), WAIT)
    finally:
        await subscription.stop()
    (record,) = seen
    assert isinstance(record, Undecodable)
    headers = dict(record.headers)
    assert record.value == b"{not json"
    assert headers[DLQ_REASON] == b"undecodable"
    assert b"Parse error" in headers[DLQ_ERROR]


async def test_a_dead_letter_read_from_the_dead_letter_topic_is_not_written_back(
    transport: Transport,
) -> None:
    dlq = _dlq_of(transport)
    await transport.dead_letter(DeadLetter(dlq, 0, 0, b"x", None, (), "again"))
    assert transport.dead_lettered == 0


def _log_of(transport: Transport) -> DeadLetterLog:
    assert isinstance(transport, KafkaTransport | MemoryTransport)
    return transport.dead_letter_log


async def _write_junk(transport: Transport, topic: str, count: int) -> None:
    """``count`` records that are no JSON, from a producer outside the bus."""
    if isinstance(transport, MemoryTransport):
        for n in range(count):
            await transport.publish_raw(topic, b"junk %d" % n)
        return
    assert isinstance(transport, KafkaTransport)
    producer = AIOKafkaProducer(bootstrap_servers=transport.settings.bootstrap_servers)
    await producer.start()
    try:
        for n in range(count):
            await producer.send(topic, b"junk %d" % n)
        await producer.flush()
    finally:
        await producer.stop()


async def _never_called(delivery: Delivery) -> None:
    raise AssertionError(f"junk was handed to a handler: {delivery}")


def _accounted(logged: tuple[int, int, int]) -> int:
    """Records the log accounts for: logged one by one, or counted in a summary."""
    single, _, summed = logged
    return single + summed


SUMMARY = re.compile(r"^(\d+) more records dead-lettered on (\S+) since ")


async def test_a_flood_of_junk_is_all_dead_lettered_and_logged_as_a_few_lines_and_counts(
    transport: Transport, caplog: pytest.LogCaptureFixture
) -> None:
    """Every junk record goes to the dead-letter topic; the log has the first few
    one by one, then one line per interval with how many more came."""
    count, topic = 10_000, f"junk.{uuid.uuid4().hex[:8]}"
    lines = _log_of(transport)
    lines.interval = 0.2  # short, so that the last summary comes soon
    await transport.subscribe([topic], f"g.{uuid.uuid4().hex[:8]}", _never_called)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING):
        await _write_junk(transport, topic, count)

        def logged() -> tuple[int, int, int]:
            """Lines one by one, summary lines, and the records the summaries count."""
            single = summaries = summed = 0
            for record in caplog.records:
                message = record.getMessage()
                if message.startswith(f"dead letter {topic}/"):
                    single += 1
                elif (found := SUMMARY.match(message)) and found[2] == topic:
                    summaries += 1
                    summed += int(found[1])
            return single, summaries, summed

        async with asyncio.timeout(WAIT):  # until the summary of the last ones is logged
            while transport.dead_lettered < count or _accounted(logged()) < count:
                await asyncio.sleep(0.05)
    took = time.monotonic() - began
    assert transport.dead_lettered == count
    assert sum((await transport.end_offsets(_dlq_of(transport))).values()) == count
    single, summaries, _ = logged()
    assert _accounted(logged()) == count  # every record is in the log, most as a count
    assert single == lines.burst
    assert summaries <= took / lines.interval + 1


def test_a_record_too_large_is_request_too_large_for_its_sender() -> None:
    error = transport_refusal(RecordTooLarge("the record is 2000000 bytes"))
    assert error.code == ErrorCode.TOO_LARGE
    assert error.message == "Request too large"
    assert error.data == "the record is 2000000 bytes"
    late = transport_refusal(NotDelivered("no broker answered within 120 s"))
    assert (late.code, late.message) == (ErrorCode.TIMEOUT, "Request timed out")
    other = transport_refusal(TransportError("broken"))
    assert other.code == ErrorCode.INTERNAL_ERROR


def test_kafkas_size_error_is_the_transport_error() -> None:
    error = KafkaRecordTooLarge("the broker refused it")
    assert isinstance(error, RecordTooLarge)
    assert str(error) == "the broker refused it"


def test_dead_letter_headers_replace_earlier_reasons() -> None:
    original = [("ce_id", b"1"), ("a2a-dlq-reason", b"old")]
    letter = DeadLetter("topic", 2, 7, b"{}", None, original, "new")
    headers = dict(dead_letter_headers(letter))
    assert headers == {
        "ce_id": b"1",
        "a2a-dlq-reason": b"new",
        "a2a-dlq-source-topic": b"topic",
        "a2a-dlq-source-partition": b"2",
        "a2a-dlq-source-offset": b"7",
    }
