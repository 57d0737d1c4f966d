"""Loop protection: a chain of agent calls deeper than the limit fails, naming the chain.

Every message a handler sends is one call deeper than the one it handles
(``calldepth``) and names the handler's agent in ``callchain``; past the bus's
limit (default 8, ``A2A_MAX_CALL_DEPTH``) it is not sent and the sender gets
-32008. Real buses on both transports.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.bus import Bus as BusClass
from a2a_bus.runtime.env import EnvError
from a2a_bus.transport.dead_letters import DLQ_REASON
from tests.buses import eventually, header, make_bus, read_dlq

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

CALL_TOO_DEEP = -32008


class Selfish(Agent):
    """Calls itself, one level deeper each time: a loop without end but for the limit."""

    agent_id = "selfish"

    @method
    def deeper(self, level: int) -> int:
        return int(self.client.request("selfish", "deeper", [level + 1]))


class Echoer(Agent):
    """Tells itself again and again (notifications: nobody waits, nothing blocks)."""

    agent_id = "echoer"
    heard: list[tuple[int, Any, Any]] = []
    lock = threading.Lock()

    @method
    def echo(self, level: int) -> None:
        attributes = self.event.get_attributes()
        with self.lock:
            self.heard.append((level, attributes.get("calldepth"), attributes.get("callchain")))
        self.client.notify("echoer", "echo", [level + 1])


async def test_an_agent_that_calls_itself_stops_at_the_limit_naming_the_chain(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus()
    await bus.aspawn(Selfish, 9)  # depths 0..8 each hold a replica while they wait
    with pytest.raises(JsonRpcError) as refused:
        await bus.async_client().request("selfish", "deeper", [0])
    error = refused.value
    assert error.code == CALL_TOO_DEEP
    assert error.message == "Call chain too deep"
    assert error.data == "call depth 9 passes the limit of 8: " + " -> ".join(["selfish"] * 9)


async def test_the_limit_is_the_buss_setting(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(max_call_depth=2)
    await bus.aspawn(Selfish, 3)
    with pytest.raises(JsonRpcError) as refused:
        await bus.async_client().request("selfish", "deeper", [0])
    assert refused.value.code == CALL_TOO_DEEP
    assert refused.value.data == "call depth 3 passes the limit of 2: selfish -> selfish -> selfish"


async def test_a_loop_of_notifications_stops_at_the_limit_and_is_dead_lettered(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    Echoer.heard = []
    bus = await make_bus(max_call_depth=3)
    await bus.aspawn(Echoer)
    await bus.async_client().notify("echoer", "echo", [0])
    [letter] = await read_dlq(bus, 1)
    reason = header(letter, DLQ_REASON)
    assert "-32008 Call chain too deep" in reason
    assert "call depth 4 passes the limit of 3: echoer -> echoer -> echoer -> echoer" in reason
    await eventually(lambda: len(Echoer.heard) == 4)
    assert Echoer.heard == [
        (0, None, None),
        (1, 1, "echoer"),
        (2, 2, "echoer,echoer"),
        (3, 3, "echoer,echoer,echoer"),
    ]


async def test_a_calldepth_that_is_no_count_is_refused(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus()
    await bus.aspawn(Selfish)
    message = {"jsonrpc": "2.0", "method": "deeper", "params": [0], "id": 1}
    [event] = bus.adaptor.from_json(message)
    event.get_attributes().update(targetagent="selfish", calldepth="deep")  # type: ignore[union-attr]
    response = await bus.async_client().call_event(event)  # type: ignore[arg-type]
    assert response is not None and response["error"]["code"] == -32600
    assert "calldepth must be a non-negative integer" in response["error"]["data"]


def test_a2a_max_call_depth_sets_the_limit() -> None:
    bus = BusClass.from_env({"A2A_MAX_CALL_DEPTH": "2"})
    assert bus.context.max_call_depth == 2
    with pytest.raises(EnvError, match="A2A_MAX_CALL_DEPTH='0'"):
        BusClass.from_env({"A2A_MAX_CALL_DEPTH": "0"})
    # '²' passes str.isdigit and 5,000 digits are more than int() reads: named, not a crash
    for value in ("\u00b2", "9" * 5000):
        with pytest.raises(EnvError, match=r"A2A_MAX_CALL_DEPTH=.*expected a whole number"):
            BusClass.from_env({"A2A_MAX_CALL_DEPTH": value})
