"""Fixtures: a bus on the in-memory transport with the test agents, and the gateway app
reached in-process with httpx's ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app

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
