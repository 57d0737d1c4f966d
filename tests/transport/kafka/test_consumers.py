"""Stopping a consumer whose broker has gone (a broker of the test's own, killed)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from a2a_bus.transport.kafka.consumers import stop_consumer
from tests.transport.kafka.own_kafka import OwnKafka, running_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

WAIT = 60.0  # upper bound on one wait; never a performance limit
#: Long enough that the consumer is surely stopped while its failed fetch backs off.
BACKOFF_MS = 20_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[OwnKafka]:
    with running_kafka(tmp_path / "kafka") as kafka:
        yield kafka


def _aiokafka_tasks() -> list[asyncio.Task[object]]:
    """Tasks of aiokafka's still running (its client's metadata task among them)."""
    return [
        task
        for task in asyncio.all_tasks()
        if not task.done() and "aiokafka" in (task.get_coro().cr_code.co_filename or "")  # type: ignore[union-attr]
    ]


async def test_a_consumer_stopped_while_its_fetch_backs_off_stops_whole(
    broker: OwnKafka, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker is killed under a fetching consumer; stopped during the fetch's
    back-off, the consumer stops without raising and leaves no aiokafka task behind."""
    topic = "consumer-stop"
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"one")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=500,
        retry_backoff_ms=BACKOFF_MS,
    )
    await consumer.start()
    stopped = False
    try:
        fetched = await asyncio.wait_for(consumer.getone(), WAIT)
        assert fetched.value == b"one"
        before = set(_aiokafka_tasks())
        assert before, "a running consumer has tasks of aiokafka's"
        caplog.set_level(logging.ERROR, logger="aiokafka.consumer.fetcher")
        broker.kill()
        async with asyncio.timeout(WAIT):
            while not any("Failed fetch messages" in r.getMessage() for r in caplog.records):
                await asyncio.sleep(0.05)
        # The failed fetch now sleeps BACKOFF_MS before it gives up.
        await asyncio.wait_for(stop_consumer(consumer), WAIT)
        stopped = True
        await asyncio.sleep(0)  # let the tasks it cancelled end
        assert [task for task in _aiokafka_tasks() if task in before] == []
    finally:
        if not stopped:
            await consumer.stop()
