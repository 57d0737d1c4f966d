"""The routing members of named params (`_agentId`, `_topic`, `_seq`, `_sessionId`)
are the bus's: they are stripped before binding, also for a handler that declares a
parameter of that name (it gets its default), on the plain-signature fast path as on
the general one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from a2a_bus import Agent, Bus, method

WAIT = 30.0  # bound on a single await, not a performance assertion


class Probe(Agent):
    agent_id = "probe"

    @method
    def plain(self, _sessionId: str = "stripped") -> str:
        return _sessionId

    @method
    def general(self, *extra: int, _sessionId: str = "stripped") -> str:
        return _sessionId

    @method
    def plain_agent(self, _agentId: str = "stripped") -> str:
        return _agentId


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    running = Bus.memory()
    await asyncio.wait_for(running.astart(), WAIT)
    await asyncio.wait_for(running.aspawn(Probe), WAIT)
    yield running
    await asyncio.wait_for(running.astop(), WAIT)


async def test_plain_handler_does_not_receive_the_session_id(bus: Bus) -> None:
    """A plain handler declaring `_sessionId` gets its default, not the routing value."""
    client = bus.async_client()
    answer = await asyncio.wait_for(client.request("probe", "plain", {"_sessionId": "s-1"}), WAIT)
    assert answer == "stripped"
    answer = await asyncio.wait_for(client.request("probe", "general", {"_sessionId": "s-1"}), WAIT)
    assert answer == "stripped"


async def test_plain_handler_does_not_receive_the_agent_id(bus: Bus) -> None:
    """A plain handler declaring `_agentId` gets its default, not the routing value."""
    client = bus.async_client()
    answer = await asyncio.wait_for(
        client.request(None, "plain_agent", {"_agentId": "probe"}), WAIT
    )
    assert answer == "stripped"
