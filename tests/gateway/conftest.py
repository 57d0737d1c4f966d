"""Fixtures: a bus on the in-memory transport with the test agents, and the gateway app
reached in-process with httpx's ASGI transport."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.gateway.ingress import Ingress
from a2a_bus.transport.base import Delivery
from tests.buses import eventually

from .agents import Echo, Secret, Spec

WAIT = 20.0  # seconds; a guard against hangs, never a performance limit


@pytest.fixture
def seen() -> list[Any]:
    return []


@pytest.fixture
async def bus(seen: list[Any]) -> AsyncIterator[Bus]:
    async with Bus.memory() as running:
        await running.aspawn(Spec)
        await running.aspawn(Echo, 1, seen)
        await running.aspawn(Secret)
        yield running


@pytest.fixture
def settings() -> GatewaySettings:
    return GatewaySettings(request_timeout=WAIT)


@pytest.fixture
async def client(bus: Bus, settings: GatewaySettings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(bus, settings)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield http


@pytest.fixture
async def served_port(bus: Bus) -> AsyncIterator[int]:
    """The port of a real uvicorn server running the gateway with default settings."""
    app = create_app(bus, GatewaySettings(request_timeout=WAIT))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    await eventually(lambda: server.started or serving.done(), "uvicorn to start")
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    await asyncio.wait_for(serving, WAIT)


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def either_bus(request: pytest.FixtureRequest) -> AsyncIterator[Bus]:
    """A bus with the Spec agent on each transport in turn (Kafka: the real broker)."""
    prefix = f"t{uuid.uuid4().hex[:10]}"
    if request.param == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        made = Bus.kafka(bootstrap, bus_options={"prefix": prefix}, metadata_max_age_ms=1000)
    else:
        made = Bus.memory(prefix=prefix)
    async with made:
        await made.aspawn(Spec)
        yield made


@contextlib.asynccontextmanager
async def ingress_replies(bus: Bus) -> AsyncIterator[tuple[Ingress, list[Any]]]:
    """A running Kafka ingress of ``bus`` and the list its answers land in (the data
    of each record on its reply topic, in order)."""
    replies: list[Any] = []

    async def deliver(delivery: Delivery) -> None:
        replies.append(delivery.event.get_data())

    async with Ingress(bus.service, timeout=WAIT) as ingress:
        await bus.transport.subscribe(
            [ingress.reply_topic], "replies", deliver, from_beginning=True
        )
        yield ingress, replies


# -- the integer bound of parse_json, met at every door ------------------------------------

#: One past the largest unsigned 64-bit integer: orjson would read it as a float.
HUGE = 2**64
HUGE_ID_REQUEST = b'{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": %d}' % HUGE
OUT_OF_RANGE = "is outside the 64-bit range"


def refused_as_out_of_range(answer: Any, literal: int) -> bool:
    """-32600 with id null, naming the integer."""
    error = answer.get("error", {})
    return (
        answer.get("id", "absent") is None
        and error.get("code") == -32600
        and f"integer {str(literal)[:20]}" in str(error.get("data"))
        and OUT_OF_RANGE in str(error.get("data"))
    )
