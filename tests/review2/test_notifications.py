"""Review: notifications that reach an agent and fail are lost without a trace.

Both transports (Kafka: the real broker).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.protocol import ErrorCode
from a2a_bus.transport.kafka_records import DLQ_REASON
from tests.bus.test_behaviour import WAIT, header, make_bus, read_dlq

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
    """Bug: host.py AgentHost._answer drops the error of a notification (no id) on the
    floor: a notification whose params do not bind (-32602) or whose handler raises
    JsonRpcError is neither answered (right: it is a notification), nor dead-lettered,
    nor logged; `notify` returned normally, so the message is silently lost.
    Unknown-method notifications and failing @subscribe handlers are dead-lettered
    with the reason ("handler-error: <code> <message>"); these should be too."""
    bus = await make_bus(Keeper)
    await bus.async_client().notify("keeper", name, params)
    letters = await read_dlq(bus, 1)
    assert reason in header(letters[0], DLQ_REASON)


async def test_a_notification_of_a_method_the_named_agent_lacks_is_refused(
    make_bus: MakeBus,
) -> None:
    """Inconsistency (notifications refused to the sender): `notify(None, "nosuch")`
    raises -32601, but `notify("keeper", "nosuch")` returns normally although the
    bus knows keeper's card and that it has no such method; the message is only
    dead-lettered where the sender never looks (stream_to dead-letters every chunk
    before its end is answered -32601). Correct: refused to the sender with -32601
    (the method in data), nothing written, as for a method no agent declares."""
    bus = await make_bus(Keeper)
    with pytest.raises(JsonRpcError) as raised:
        await asyncio.wait_for(bus.async_client().notify("keeper", "nosuch", {}), WAIT)
    assert raised.value.code == ErrorCode.METHOD_NOT_FOUND
    assert raised.value.data == "nosuch"
