"""Notifications that fail: nobody is answered, so they are refused to the sender
when the bus can tell, and dead-lettered with the reason when only the agent can.

Both transports (Kafka: the real broker).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.protocol import ErrorCode
from a2a_bus.transport.kafka.records import DLQ_REASON
from tests.buses import WAIT, header, make_bus, read_dlq

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]


class Keeper(Agent):
    agent_id = "keeper"

    @method
    def store(self, x: int) -> None:
        """Takes one integer."""

    @method
    def refuse(self) -> None:
        raise JsonRpcError(-32010, "Refused", "not today")


@pytest.mark.parametrize(
    ("name", "params", "reason"),
    [("store", {"y": 1}, "-32602"), ("refuse", {}, "-32010")],
    ids=["params-that-do-not-bind", "handler-raises-JsonRpcError"],
)
async def test_a_failed_notification_is_dead_lettered(
    make_bus: MakeBus, name: str, params: dict[str, int], reason: str
) -> None:
    """A notification whose params do not bind (-32602) or whose handler raises
    JsonRpcError is dead-lettered with the reason ("handler-error: <code> <message>"),
    as a failing @subscribe handler is (it was dropped without a trace)."""
    bus = await make_bus(Keeper)
    await bus.async_client().notify("keeper", name, params)
    letters = await read_dlq(bus, 1)
    assert reason in header(letters[0], DLQ_REASON)


async def test_a_notification_of_a_method_the_named_agent_lacks_is_refused(
    make_bus: MakeBus,
) -> None:
    """A notification of a method the named agent's card does not list is refused to
    the sender with -32601 (the method in data), nothing written, as for a method no
    agent declares (it was dead-lettered where the sender never looks)."""
    bus = await make_bus(Keeper)
    with pytest.raises(JsonRpcError) as raised:
        await asyncio.wait_for(bus.async_client().notify("keeper", "nosuch", {}), WAIT)
    assert raised.value.code == ErrorCode.METHOD_NOT_FOUND
    assert raised.value.data == "nosuch"
