"""A native CloudEvent without ``a2amethod`` sent through the bus API calls the method
its type names (PROTOCOL.md section 3), on both transports; ``a2amethod`` wins when
both are there."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from a2a_bus import Agent, Bus, method
from a2a_bus.protocol import DEFAULT_TYPE_PREFIX, CloudEvent
from tests.agents import Calc, Echo

pytestmark = pytest.mark.timeout(120)

WAIT = 30.0  # upper bound on any single await; never a performance assertion


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
