"""``POST /events`` passes a native event's ``replyto`` extension through unchecked, so
any caller makes an agent write its answer on any topic it names.

The host answers a request on the event's ``replyto`` (a2a_bus/host.py ``respond``),
and the gateway publishes the event "as sent" (a2a_bus/gateway/events.py). A caller
can therefore put a JSON-RPC response event on a pub/sub subject it may not publish
to (its token's ``topics`` allow-list is bypassed: every subscriber of that subject
receives a ``common.response`` event), into the discovery registry, into another
agent's inbox (that agent dead-letters it), or on a topic of any new name (which the
Kafka transport creates). The Kafka ingress guards exactly this for its ``reply-to``
header (docs/gateway.md: a reply-to naming one of the bus's own topics is ignored;
``A2A_INGRESS_REPLY_TOPICS`` "keeps producers from making the bus create topics of
any name"), and it overrides an event's own ``replyto``; the HTTP binding does not.
Correct: a ``replyto`` on ``POST /events`` is refused (4xx) or dropped, never used
to write on the bus's own topics.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.gateway.auth import Access
from a2a_bus.transport.base import Delivery

from .conftest import WAIT

pytestmark = pytest.mark.timeout(120)

TOKEN = "caller-token"


@pytest.fixture
async def token_client(memory_bus: Bus) -> AsyncIterator[httpx.AsyncClient]:
    # may call calc's subtract and publish on orders.#, nothing else
    access = Access(name="caller", agents=("calc",), methods=("subtract",), topics=("orders.#",))
    app = create_app(memory_bus, GatewaySettings(request_timeout=WAIT, tokens={TOKEN: access}))
    transport = httpx.ASGITransport(app=app)
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gateway", headers=headers
    ) as http:
        yield http


async def test_an_events_replyto_cannot_aim_an_answer_at_a_forbidden_subject(
    memory_bus: Bus, token_client: httpx.AsyncClient
) -> None:
    bus = memory_bus
    subject_topic = f"{bus.topics.prefix}.topic.news.x"  # news.x: not in the token's topics
    received: list[Any] = []

    async def spy(delivery: Delivery) -> None:
        received.append(delivery.event.get_data())

    await bus.transport.subscribe([subject_topic], "spy", spy, from_beginning=True)
    event = {
        "specversion": "1.0",
        "id": "aimed-1",
        "source": "/outside",
        "type": f"{bus.adaptor.prefix}.subtract.req",
        "mcptype": "request",
        "a2amethod": "subtract",
        "targetagent": "calc",
        "replyto": subject_topic,
        "datacontenttype": "application/json",
        "data": [5, 1],
    }
    response = await asyncio.wait_for(
        token_client.post(
            "/events",
            content=orjson.dumps(event),
            headers={"content-type": "application/cloudevents+json"},
        ),
        WAIT,
    )
    if response.status_code == 202:
        # calc handles one message at a time: once a later call is answered, the
        # answer to the event above has been written wherever it was going
        client = bus.async_client()
        assert await asyncio.wait_for(client.request("calc", "subtract", [2, 1]), WAIT) == 1
        await asyncio.sleep(0)  # let the memory transport hand over what it holds
    else:
        assert 400 <= response.status_code < 500, response.text
    assert received == [], "an answer was written on a subject the token may not publish to"
