"""Review of the docs against the system: routing members in a handler's params.

docs/bus.md:56: "`@method(name=None)` | a JSON-RPC method. Positional params bind in
order, named params by name; the routing members `_agentId`, `_topic`, `_seq`,
`_sessionId` are stripped". The binder strips them only on its general path (a
handler with ``*args``/``**kwargs`` or a stream parameter). On the fast path for plain
signatures (``a2a_bus.binding.Binder._named``) a routing member is dropped only when
the handler does not accept a parameter of that name: a plain handler that declares
``_sessionId`` (or ``_topic``, ``_agentId``) receives the routing value, while the same
parameter next to ``*extra`` gets its default. (``Probe.general`` below, asked the same
way, answers its default: the general path is right.)
"""

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
    """docs/bus.md:56 says `_sessionId` is stripped; a plain handler declaring it
    receives ``"s-1"`` instead of its default."""
    client = bus.async_client()
    answer = await asyncio.wait_for(client.request("probe", "plain", {"_sessionId": "s-1"}), WAIT)
    assert answer == "stripped"


async def test_plain_handler_does_not_receive_the_agent_id(bus: Bus) -> None:
    """docs/bus.md:56 says `_agentId` is stripped; a plain handler declaring it
    receives the routing value ``"probe"`` instead of its default."""
    client = bus.async_client()
    answer = await asyncio.wait_for(
        client.request(None, "plain_agent", {"_agentId": "probe"}), WAIT
    )
    assert answer == "stripped"
