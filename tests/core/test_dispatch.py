"""Dispatch through the bus API, on both transports (Kafka: the real broker).

A native CloudEvent without ``a2amethod`` calls the method its type names (PROTOCOL.md
section 3); ``a2amethod`` wins when both are there. Notifications that fail: nobody
is answered, so they are refused to the sender when the bus can tell, and
dead-lettered with the reason when only the agent can.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.protocol import DEFAULT_TYPE_PREFIX, CloudEvent, ErrorCode
from a2a_bus.transport.dead_letters import DLQ_REASON
from tests.agents import Calc, Echo
from tests.buses import WAIT, header, make_bus, read_dlq

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

pytestmark = pytest.mark.timeout(120)

MakeBus = Callable[..., Awaitable[Bus]]


class Notes(Agent):
    agent_id = "notes"
    taken: list[str] = []
    arrived = threading.Event()

    @method
    def note(self, text: str) -> None:
        Notes.taken.append(text)
        Notes.arrived.set()


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def bus(request: pytest.FixtureRequest) -> AsyncIterator[Bus]:
    options: dict[str, Any] = {"prefix": f"t{uuid.uuid4().hex[:10]}", "request_timeout": WAIT}
    if request.param == "memory":
        running = Bus.memory(**options)
    else:
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        running = Bus.kafka(bootstrap, bus_options=options, metadata_max_age_ms=1000)
    for agent in (Calc, Echo, Notes):
        running.spawn(agent)
    await asyncio.wait_for(running.astart(), WAIT)
    yield running
    await asyncio.wait_for(running.astop(), WAIT)


def native(type_suffix: str, data: Any, **extensions: str) -> CloudEvent:
    attributes = {
        "id": uuid.uuid4().hex,
        "source": "https://example.com/producer",
        "type": f"{DEFAULT_TYPE_PREFIX}.{type_suffix}",
        **extensions,
    }
    return CloudEvent(attributes, data)


async def call(bus: Bus, event: CloudEvent) -> dict[str, Any] | None:
    answer: dict[str, Any] | None = await asyncio.wait_for(
        bus.async_client().call_event(event), WAIT
    )
    return answer


async def test_a_request_is_routed_by_the_method_its_type_names(bus: Bus) -> None:
    event = native("subtract.req", {"minuend": 42, "subtrahend": 23}, mcptype="request")
    assert await call(bus, event) == {"jsonrpc": "2.0", "result": 19, "id": event.get_id()}
    assert event.get_extension("a2amethod") is None, "the caller's event is left as it was"


async def test_a_notification_is_routed_by_its_type(bus: Bus) -> None:
    Notes.taken.clear()
    Notes.arrived.clear()
    text = uuid.uuid4().hex
    event = native("note", {"text": text}, mcptype="notification")
    assert await call(bus, event) is None
    assert await asyncio.to_thread(Notes.arrived.wait, WAIT)
    assert Notes.taken == [text]


async def test_a_builtin_method_is_answered_by_its_type(bus: Bus) -> None:
    event = native("methods.list.req", {}, mcptype="request")
    answer = await call(bus, event)
    assert answer is not None
    offered = {(m["agent"], m["name"]) for m in answer["result"]["methods"]}
    assert {("calc", "subtract"), ("echo", "echo"), ("notes", "note")} <= offered


async def test_a2amethod_wins_over_the_type(bus: Bus) -> None:
    event = native("subtract.req", {"value": "echoed"}, mcptype="request", a2amethod="echo")
    assert await call(bus, event) == {"jsonrpc": "2.0", "result": "echoed", "id": event.get_id()}


async def test_an_unknown_method_in_the_type_is_method_not_found(bus: Bus) -> None:
    event = native("nothing.here.req", {}, mcptype="request")
    answer = await call(bus, event)
    assert answer is not None
    assert answer["error"]["code"] == -32601
    assert answer["error"]["data"] == "nothing/here"


# -- notifications that fail ---------------------------------------------------------------


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
