"""Agent -> caller streams from the generator's side (hosting/outbound.py): a long
stream is written whole, in order and once, its end last; a generator that crashes
after its first chunk is not run again, one that crashes before it is, and a chunk
the caller's reply topic refuses ends the stream with its error, naming it, while
chunks it takes one by one (not in one batch) all arrive. Both transports, the
last two on Kafka only. The actor runs at most its credits ahead of the chunks
settled, waiting for one when it has none, and giving up after its timeout.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ClassVar

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from cloudevents.core.v1.event import CloudEvent

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.core.streams import STREAM_END
from a2a_bus.hosting.outbound import Credits
from a2a_bus.protocol import ErrorCode, ext
from tests.buses import WAIT, assert_dead_not_retried, eventually, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]


#: Items of the long stream: several record batches' worth on Kafka.
LONG = 2000


class Counter(Agent):
    agent_id = "counter"

    @method
    def count(self, n: int) -> Iterator[int]:
        yield from range(n)


async def _retained(bus: Bus, topic: str) -> list[CloudEvent]:
    """Every event ``topic`` retains, in the order it was written."""
    events: list[CloudEvent] = []
    position: dict[int, int] | None = None
    while True:
        batch = await asyncio.wait_for(
            bus.transport.read(topic, limit=1000, position=position), WAIT
        )
        if not batch.events:
            return events
        events += batch.events
        position = batch.position


async def test_a_long_stream_is_written_whole_in_order_and_once_with_its_end_last(
    make_bus: MakeBus,
) -> None:
    """The caller gets every item once, none ahead of its turn; its reply topic holds
    chunk 0 to 1,999 in that order, each once, then the end."""
    bus = await make_bus(Counter)
    async with asyncio.timeout(WAIT):
        items = [item async for item in bus.async_client().stream("counter", "count", [LONG])]
    assert items == list(range(LONG))
    assert (bus.metrics.stream_duplicates, bus.metrics.stream_gaps) == (0, 0)
    written = [
        (event.get_extension(ext.SEQ), bool(event.get_extension(STREAM_END)))
        for event in await _retained(bus, bus.reply_topic)
    ]
    assert written == [(seq, False) for seq in range(LONG)] + [(LONG, True)]


class Teller(Agent):
    """Tells a story in words; each run tells it differently (an LLM, a live feed)."""

    agent_id = "teller"
    #: The runs started, per test token.
    runs: ClassVar[dict[str, int]] = {}

    @method
    def story(self, token: str, crash_at: int) -> Iterator[str]:
        """Four words; the first run crashes before word ``crash_at``."""
        run = self.runs[token] = self.runs.get(token, 0) + 1
        for n in range(4):
            if run == 1 and n == crash_at:
                raise RuntimeError("the backend went away")
            yield f"run {run} word {n}"


async def _told(bus: Bus, token: str, crash_at: int) -> tuple[list[str], JsonRpcError | None]:
    """The words of a story streamed, and the error that ended it (None: it completed)."""
    words: list[str] = []

    async def read() -> JsonRpcError | None:
        try:
            async for word in bus.async_client().stream("teller", "story", [token, crash_at]):
                words.append(word)
        except JsonRpcError as exc:
            return exc
        return None

    return words, await asyncio.wait_for(read(), WAIT)


async def test_a_generator_that_crashes_after_sending_chunks_is_not_retried(
    make_bus: MakeBus,
) -> None:
    """A retry would carry on from another run's chunks: the stream ends with -32603."""
    bus = await make_bus(Teller)
    token = uuid.uuid4().hex
    words, error = await _told(bus, token, 2)
    assert words == ["run 1 word 0", "run 1 word 1"]
    assert error is not None and error.code == ErrorCode.INTERNAL_ERROR
    assert Teller.runs[token] == 1
    crash = "RuntimeError: the backend went away"
    await assert_dead_not_retried(bus, crash, "output stream was partly sent")
    # Gathered by a plain request, the same: an error, not a list stitched from two runs.
    again = uuid.uuid4().hex
    with pytest.raises(JsonRpcError) as gathered:
        await asyncio.wait_for(bus.async_client().request("teller", "story", [again, 2]), WAIT)
    assert gathered.value.code == ErrorCode.INTERNAL_ERROR
    assert Teller.runs[again] == 1


async def test_a_generator_that_crashes_before_its_first_chunk_is_retried(
    make_bus: MakeBus,
) -> None:
    bus = await make_bus(Teller)
    words, error = await _told(bus, uuid.uuid4().hex, 0)
    assert (words, error) == ([f"run 2 word {n}" for n in range(4)], None)
    assert bus.metrics.redeliveries == 1
    assert bus.metrics.stream_duplicates == 0


class Oversized(Agent):
    """Streams two small items, one the caller's reply topic refuses, then more."""

    agent_id = "oversized"

    @method
    def items(self) -> Iterator[str]:
        for n in range(6):
            yield "x" * 5000 if n == 2 else f"item {n}"


async def _bus_with_small_reply_topic(kafka_bootstrap: str, agent: type[Agent]) -> Bus:
    """A started Kafka bus hosting ``agent``, whose reply topic takes records of at
    most 2,000 bytes (a cluster's max.message.bytes below the bus's bounds, and
    far below the producer's batch size)."""
    uid = uuid.uuid4().hex[:10]
    options = {"prefix": f"t{uid}", "node": f"n{uid}", "heartbeat": 60.0, "request_timeout": WAIT}
    bus = Bus.kafka(kafka_bootstrap, bus_options=options, metadata_max_age_ms=1000)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await asyncio.wait_for(admin.start(), WAIT)
    try:
        small = NewTopic(bus.reply_topic, 3, 1, topic_configs={"max.message.bytes": "2000"})
        await asyncio.wait_for(admin.create_topics([small]), WAIT)
    finally:
        await admin.close()
    bus.spawn(agent)
    await asyncio.wait_for(bus.astart(), WAIT)
    return bus


@pytest.mark.kafka
async def test_a_chunk_the_broker_refuses_ends_the_stream_with_its_error(
    kafka_bootstrap: str,
) -> None:
    """The stream ends at the chunk the caller's reply topic refuses with -32005
    naming it, no later chunk reaches the caller, and nothing is left running."""
    bus = await _bus_with_small_reply_topic(kafka_bootstrap, Oversized)
    try:
        received: list[Any] = []
        with pytest.raises(JsonRpcError) as failed:
            async with asyncio.timeout(WAIT):
                async for item in bus.async_client().stream("oversized", "items"):
                    received.append(item)
        assert failed.value.code == ErrorCode.TOO_LARGE
        assert failed.value.message == "Response too large"  # the chunk is an answer
        assert str(failed.value.data).startswith("chunk 2 could not be sent: ")
        assert "the broker refused the record" in str(failed.value.data)
        assert received == ["item 0", "item 1"]
        await eventually(lambda: not bus.dispatcher.running_streams)
        await eventually(lambda: len(bus.dispatcher.correlator) == 0)
    finally:
        await asyncio.wait_for(bus.astop(), WAIT)


class Paragraphs(Agent):
    """Streams items of some 400 characters: each fits the small reply topic, a few
    together do not."""

    agent_id = "paragraphs"

    @method
    def items(self, count: int) -> Iterator[str]:
        for n in range(count):
            yield f"{n:04d} " + "x" * 400


@pytest.mark.kafka
async def test_a_stream_of_chunks_the_reply_topic_takes_one_by_one_arrives_whole(
    kafka_bootstrap: str,
) -> None:
    """Chunks written without waiting for each other share record batches, which
    the reply topic refuses as too large: each chunk fits alone, so every one is
    written, in order, and the stream completes."""
    bus = await _bus_with_small_reply_topic(kafka_bootstrap, Paragraphs)
    try:
        async with asyncio.timeout(WAIT):
            items = [i async for i in bus.async_client().stream("paragraphs", "items", [200])]
        assert [int(item[:4]) for item in items] == list(range(200))
        assert (bus.metrics.stream_duplicates, bus.metrics.stream_gaps) == (0, 0)
    finally:
        await asyncio.wait_for(bus.astop(), WAIT)


def test_an_actor_without_credit_waits_for_one_and_gives_up_after_its_timeout() -> None:
    credits = Credits(2)
    assert credits.take(timeout=WAIT) and credits.take(timeout=WAIT)
    assert not credits.take(timeout=0.01)  # none left and none given
    taken: queue.SimpleQueue[bool] = queue.SimpleQueue()
    waiting = threading.Thread(target=lambda: taken.put(credits.take(timeout=WAIT)))
    waiting.start()
    time.sleep(0.05)
    assert taken.empty()  # still waiting
    credits.give()
    assert taken.get(timeout=WAIT) is True
    waiting.join(WAIT)


def test_credits_passed_between_two_threads_are_never_exceeded_nor_lost() -> None:
    """The actor's thread takes a credit per item, another thread gives one back per
    item it takes over: the actor is never more than the limit ahead, and every wait
    ends (a wake-up lost would leave it waiting until its timeout)."""
    limit, items = 8, 5000
    credits = Credits(limit)
    handed: queue.SimpleQueue[int] = queue.SimpleQueue()
    given = 0
    ahead: list[int] = []

    def actor() -> None:
        for n in range(items):
            if not credits.take(timeout=WAIT):
                ahead.append(-1)
                return
            ahead.append(n + 1 - given)  # given only grows: never more than it was
            handed.put(n)

    def settler() -> None:
        nonlocal given
        for _ in range(items):
            handed.get(timeout=WAIT)
            given += 1
            credits.give()

    threads = [threading.Thread(target=actor), threading.Thread(target=settler)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert len(ahead) == items and min(ahead) > 0, "a wait for credit was never woken"
    assert max(ahead) <= limit
