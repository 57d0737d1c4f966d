"""A caller -> agent stream (``stream_to``): the session id every part of it carries."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Iterator

from a2a_bus import Agent, Bus, method
from a2a_bus.protocol import ext

WAIT = 30.0  # bound on a single await, not a performance assertion
STREAMS = 64


class Summer(Agent):
    agent_id = "summer"

    @method
    def total(self, values: Iterator[int]) -> int:
        return sum(values)


async def _session_ids_on_the_wire(streams: int) -> list[str]:
    """The session id of every part of ``streams`` streams, as the agent receives them."""
    bus = Bus.memory()
    await asyncio.wait_for(bus.astart(), WAIT)
    try:
        await asyncio.wait_for(bus.aspawn(Summer), WAIT)
        client = bus.async_client()
        for n in range(streams):
            sent = client.stream_to("summer", "total", [n, 1])
            assert await asyncio.wait_for(sent, WAIT) == n + 1
        batch = await bus.transport.read(bus.topics.agent("summer"), limit=10 * streams)
    finally:
        await asyncio.wait_for(bus.astop(), WAIT)
    return [event.get_extension(ext.SESSION) for event in batch.events]


async def test_every_stream_has_a_session_id_of_its_own_that_cannot_be_guessed() -> None:
    """An agent knows a stream by its session id (and method): one who could guess
    another caller's id could feed, end or abort that stream. Each id is URL-safe
    base64 of 128 random bits: every bit varies across streams as a coin does (a
    counter, or a prefix shared by one process's ids, keeps bits fixed)."""
    sessions = await _session_ids_on_the_wire(STREAMS)
    ids = list(dict.fromkeys(sessions))
    assert len(ids) == STREAMS
    assert all(sessions.count(id) == 3 for id in ids)  # its two chunks and its end
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22,}", id) for id in ids), ids[:3]
    values = [int.from_bytes(base64.urlsafe_b64decode(id + "==")[:16]) for id in ids]
    for bit in range(128):
        # Of 64 fair coins, fewer than 8 or more than 56 heads: a chance below 1e-10.
        ones = sum(value >> bit & 1 for value in values)
        assert 8 <= ones <= STREAMS - 8, (bit, ones, ids[:3])
