"""``transport.dead_lettered`` counts every record written to the dead-letter topic
through the transport: the ones it decides on itself (undecodable records) and the
bus's own (a handler that kept crashing, a notification whose params do not bind),
which ``bus.metrics.dead_letters`` counts too."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from a2a_bus import Agent, Bus, method

WAIT = 30.0  # bound on a single await, not a performance assertion


class Strict(Agent):
    agent_id = "strict"

    @method
    def note(self, x: int) -> None:
        pass


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def bus(request: pytest.FixtureRequest) -> AsyncIterator[Bus]:
    options: dict[str, Any] = {"prefix": f"rv6{uuid.uuid4().hex[:10]}", "heartbeat": 60.0}
    if request.param == "memory":
        running = Bus.memory(**options)
    else:
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        running = Bus.kafka(bootstrap, bus_options=options)
    await asyncio.wait_for(running.astart(), WAIT)
    await asyncio.wait_for(running.aspawn(Strict), WAIT)
    yield running
    await asyncio.wait_for(running.astop(), WAIT)


async def test_transport_counts_the_dead_letters_written_through_it(bus: Bus) -> None:
    """A notification whose params do not bind is dead-lettered by the bus
    (``handler-error: -32602 ...``) through ``bus.transport``, which counts it."""
    client = bus.async_client()
    await asyncio.wait_for(client.notify("strict", "note", {"x": "not an int"}), WAIT)
    deadline = time.monotonic() + WAIT
    while bus.metrics.dead_letters < 1:
        assert time.monotonic() < deadline, "the notification was not dead-lettered"
        await asyncio.sleep(0.02)
    assert bus.transport.dead_lettered == bus.metrics.dead_letters == 1
