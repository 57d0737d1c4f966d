"""Fixtures of the review tests: a bus with a small calculator agent on each transport
(Kafka: the real broker), and the gateway app reached in-process."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from a2a_bus import Agent, method
from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app

WAIT = 30.0  # seconds; a guard against hangs, never a performance limit


class Calc(Agent):
    agent_id = "calc"

    @method
    def subtract(self, minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend

    @method
    def identity(self, value: Any) -> Any:
        return value


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def either_bus(request: pytest.FixtureRequest) -> AsyncIterator[Bus]:
    prefix = f"r{uuid.uuid4().hex[:10]}"
    if request.param == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        made = Bus.kafka(bootstrap, bus_options={"prefix": prefix}, metadata_max_age_ms=1000)
    else:
        made = Bus.memory(prefix=prefix)
    async with made:
        await made.aspawn(Calc)
        yield made


@pytest.fixture
async def memory_bus() -> AsyncIterator[Bus]:
    async with Bus.memory(prefix=f"r{uuid.uuid4().hex[:10]}") as made:
        await made.aspawn(Calc)
        yield made


@pytest.fixture
async def client(memory_bus: Bus) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(memory_bus, GatewaySettings(request_timeout=WAIT))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield http
