"""``GET /topics/{subject}/events``: a live view shows what is published from now on,
and creates no topic (Kafka: the real broker, its topics listed by an admin client)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest
import uvicorn
from aiokafka.admin import AIOKafkaAdminClient

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from tests.buses import eventually

from .conftest import WAIT

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def gateway(either_bus: Bus) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a real uvicorn server running the gateway of ``either_bus``."""
    app = create_app(either_bus, GatewaySettings(request_timeout=WAIT))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    await eventually(lambda: server.started or serving.done(), "uvicorn to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
        yield http
    server.should_exit = True
    await asyncio.wait_for(serving, WAIT)


async def topic_exists(request: pytest.FixtureRequest, bus: Bus, topic: str) -> bool:
    """Whether the transport has ``topic`` (Kafka: asked of the cluster, apart from the bus)."""
    if bus.transport.in_process:
        return bool(await bus.transport.end_offsets(topic))
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return topic in await admin.list_topics()
    finally:
        await admin.close()


async def next_event_data(lines: AsyncIterator[str]) -> object:
    """The data of the next CloudEvent the view sends."""
    async for line in lines:
        if line.startswith("data: "):
            return orjson.loads(line.removeprefix("data: "))["data"]
    raise AssertionError("the view ended")


async def test_a_view_of_an_unused_subject_creates_no_topic_and_shows_its_first_event(
    request: pytest.FixtureRequest, either_bus: Bus, gateway: httpx.AsyncClient
) -> None:
    topic = either_bus.topics.subject("never.used")
    async with gateway.stream("GET", "/topics/never.used/events") as response:
        assert response.status_code == 200
        lines = response.aiter_lines()
        assert await asyncio.wait_for(anext(lines), WAIT) == ": tailing never.used"
        assert not await topic_exists(request, either_bus, topic)
        await either_bus.async_client().publish("never.used", {"n": 1})
        assert await asyncio.wait_for(next_event_data(lines), WAIT) == {"n": 1}


async def test_a_view_of_a_used_subject_shows_what_is_published_after_it_opened(
    either_bus: Bus, gateway: httpx.AsyncClient
) -> None:
    client = either_bus.async_client()
    await client.publish("news.sport", {"n": 0})
    async with gateway.stream("GET", "/topics/news.sport/events") as response:
        lines = response.aiter_lines()
        assert await asyncio.wait_for(anext(lines), WAIT) == ": tailing news.sport"
        await client.publish("news.sport", {"n": 1})
        assert await asyncio.wait_for(next_event_data(lines), WAIT) == {"n": 1}
