"""Review of the docs against the system: reading a subject's history on Kafka.

docs/bus.md:142-148 (and README.md:50, docs/bus.md:44) promise that ``read`` returns
the retained events "oldest first, partitions merged by record time", and that
``newest=True`` "gives the last ``limit`` events". On Kafka a record's time has
millisecond resolution; events published one after the other (each publish awaited,
so each acknowledged before the next is sent) often share a millisecond, and
``heapq.merge`` then puts the one on the lower partition first, whatever order they
were published in. So a page is not oldest first, and ``newest`` can return an older
event in place of a newer one.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from a2a_bus import Bus

WAIT = 30.0  # bound on a single await, not a performance assertion
COUNT = 100

pytestmark = pytest.mark.kafka


@pytest.fixture
async def bus(kafka_bootstrap: str) -> AsyncIterator[Bus]:
    options = {"prefix": f"rv6{uuid.uuid4().hex[:10]}", "heartbeat": 60.0}
    running = Bus.kafka(kafka_bootstrap, bus_options=options, partitions=3)
    await asyncio.wait_for(running.astart(), WAIT)
    yield running
    await asyncio.wait_for(running.astop(), WAIT)


async def publish_in_sequence(bus: Bus, subject: str) -> None:
    """``COUNT`` events ``{"n": i}``, each publish acknowledged before the next starts."""
    client = bus.async_client()
    for i in range(COUNT):
        await asyncio.wait_for(client.publish(subject, {"n": i}), WAIT)


async def test_kafka_read_returns_events_oldest_first(bus: Bus) -> None:
    """docs/bus.md:142-144: "at most `limit` ... CloudEvents that the subject's topic
    retains, oldest first, partitions merged by record time"; README.md:50
    ``client.read("orders.eu", limit=100)  # retained events, oldest first``.

    Actually, on Kafka, events published one after the other within the same
    millisecond come back in partition order: e.g. ``[..., 9, 11, 10, 12, ...]``.
    """
    await publish_in_sequence(bus, "orders.seq")
    page = await asyncio.wait_for(bus.async_client().read("orders.seq", limit=1000), WAIT)
    read = [event.get_data()["n"] for event in page.events]
    assert sorted(read) == list(range(COUNT))
    assert read == list(range(COUNT)), "events published in sequence were not read oldest first"


async def test_kafka_read_newest_gives_the_last_events(bus: Bus) -> None:
    """docs/bus.md:146-147: "`newest=True` gives the last `limit` events instead".

    Actually, on Kafka, when two events published one after the other share a
    millisecond and the newer one sits on a lower partition, the merge puts it first;
    a ``newest`` page whose boundary falls between them holds the older event and
    leaves out the newer one.
    """
    await publish_in_sequence(bus, "orders.tail")
    client = bus.async_client()
    page = await asyncio.wait_for(client.read("orders.tail", limit=1000), WAIT)
    merged = [event.get_data()["n"] for event in page.events]
    # Page boundaries that fall right after a newer event placed before an older one.
    limits = [COUNT - (j + 1) for j in range(COUNT - 1) if merged[j] > merged[j + 1]][:5]
    if not limits:
        limits = [10, 50]
    for limit in limits:
        newest = await asyncio.wait_for(client.read("orders.tail", limit=limit, newest=True), WAIT)
        got = sorted(event.get_data()["n"] for event in newest.events)
        assert got == list(range(COUNT - limit, COUNT)), f"newest={limit} is not the last {limit}"
