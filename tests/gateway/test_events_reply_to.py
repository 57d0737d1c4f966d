"""``POST /events`` never lets a sender say where an answer goes, nor answer a request:
an event naming its own ``replyto``, or a response event, is refused with 400 and
nothing is published.

The host answers a request on its event's ``replyto``; taken as sent, a caller would
make an agent write its answer on a subject its token may not publish to, into the
discovery registry, into another agent's inbox, or on a topic of any new name (which
the Kafka transport creates). A response event would reach a reply topic and answer
another caller's pending request with a result of the poster's choosing. The rule is
``routing.outside_refusal``, which the Kafka ingress applies too
(test_ingress_reply_to.py, test_ingress_forged_answer.py). A request without
``replyto`` is still published and runs.
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
from a2a_bus.transport.memory.transport import MemoryTransport

from . import agents
from .agents import RELEASE, Slow
from .conftest import WAIT

pytestmark = pytest.mark.timeout(120)

TOKEN = "caller-token"
CE_JSON = {"content-type": "application/cloudevents+json"}


@pytest.fixture
async def token_client(bus: Bus) -> AsyncIterator[httpx.AsyncClient]:
    # may call spec's subtract and update and publish on orders.#, nothing else
    access = Access(
        name="caller", agents=("spec",), methods=("subtract", "update"), topics=("orders.#",)
    )
    app = create_app(bus, GatewaySettings(request_timeout=WAIT, tokens={TOKEN: access}))
    transport = httpx.ASGITransport(app=app)
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gateway", headers=headers
    ) as http:
        yield http


def request_event(bus: Bus, method: str, data: Any, **attributes: Any) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": "aimed-1",
        "source": "/outside",
        "type": f"{bus.adaptor.prefix}.{method}.req",
        "mcptype": "request",
        "a2amethod": method,
        "targetagent": "spec",
        "datacontenttype": "application/json",
        "data": data,
        **attributes,
    }


async def test_an_events_replyto_cannot_aim_an_answer_at_a_forbidden_subject(
    bus: Bus, token_client: httpx.AsyncClient
) -> None:
    subject_topic = f"{bus.topics.prefix}.topic.news.x"  # news.x: not in the token's topics
    received: list[Any] = []

    async def spy(delivery: Delivery) -> None:
        received.append(delivery.event.get_data())

    await bus.transport.subscribe([subject_topic], "spy", spy, from_beginning=True)
    event = request_event(bus, "subtract", [5, 1], replyto=subject_topic)
    response = await asyncio.wait_for(
        token_client.post("/events", content=orjson.dumps(event), headers=CE_JSON), WAIT
    )
    assert response.status_code == 400, response.text
    assert "'aimed-1' refused: replyto is set by the bus" in response.json()["error"]
    # spec handles one message at a time: once a later call is answered, an answer
    # to the event above would have been written wherever it was going
    client = bus.async_client()
    assert await asyncio.wait_for(client.request("spec", "subtract", [2, 1]), WAIT) == 1
    await asyncio.sleep(0)  # let the memory transport hand over what it holds
    assert received == [], "an answer was written on a subject the token may not publish to"


@pytest.mark.parametrize("target", ["registry", "inbox", "new-topic", "ingress-reply"])
async def test_no_replyto_is_taken_from_outside(
    bus: Bus, client: httpx.AsyncClient, target: str
) -> None:
    topic = {
        "registry": bus.topics.registry,
        "inbox": bus.topics.agent("echo"),
        "new-topic": "brand.new.topic",
        "ingress-reply": bus.topics.ingress_reply,
    }[target]
    transport = bus.transport
    assert isinstance(transport, MemoryTransport)
    writes = dict(transport.writes)
    event = request_event(bus, "subtract", [5, 1], replyto=topic)
    response = await client.post("/events", content=orjson.dumps(event), headers=CE_JSON)
    assert response.status_code == 400, response.text
    assert "replyto" in response.json()["error"]
    assert transport.writes == writes


async def test_a_notification_carrying_a_request_and_a_replyto_is_refused(
    bus: Bus, client: httpx.AsyncClient
) -> None:
    # The agent answers whatever JSON-RPC request the data holds, whatever the
    # event's own kind: the replyto is refused on every kind of event.
    event = request_event(
        bus,
        "subtract",
        {"jsonrpc": "2.0", "method": "subtract", "params": [5, 1], "id": 1},
        mcptype="notification",
        replyto=bus.topics.subject("news.x"),
    )
    response = await client.post("/events", content=orjson.dumps(event), headers=CE_JSON)
    assert response.status_code == 400, response.text


async def test_a_batch_with_one_replyto_publishes_nothing(
    bus: Bus, client: httpx.AsyncClient
) -> None:
    agents.NOTIFIED.clear()
    good = request_event(bus, "update", [1], id="good")
    bad = request_event(bus, "update", [2], id="bad", replyto=bus.topics.subject("news.x"))
    response = await client.post(
        "/events",
        content=orjson.dumps([good, bad]),
        headers={"content-type": "application/cloudevents-batch+json"},
    )
    assert response.status_code == 400, response.text
    assert "'bad' refused" in response.json()["error"]
    assert await asyncio.wait_for(bus.async_client().request("spec", "sum", [1, 2]), WAIT) == 3
    assert agents.NOTIFIED == []


async def test_a_request_without_replyto_is_still_published_and_runs(
    bus: Bus, token_client: httpx.AsyncClient
) -> None:
    agents.NOTIFIED.clear()
    event = request_event(bus, "update", [7, 8])
    response = await token_client.post("/events", content=orjson.dumps(event), headers=CE_JSON)
    assert response.status_code == 202, response.text
    assert response.json()["accepted"] == [{"id": "aimed-1", "topic": bus.topics.agent("spec")}]

    async def ran() -> None:
        while ("update", (7, 8)) not in agents.NOTIFIED:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(ran(), WAIT)


# -- responses: only the agent a request reached answers it ------------------------------


@pytest.fixture
async def slow_bus(bus: Bus) -> AsyncIterator[Bus]:
    RELEASE.clear()
    await bus.aspawn(Slow)
    yield bus
    RELEASE.set()


async def test_a_posted_response_event_cannot_answer_another_callers_request(
    slow_bus: Bus, client: httpx.AsyncClient
) -> None:
    bus = slow_bus
    victim = asyncio.create_task(
        client.post("/rpc", content=b'{"jsonrpc": "2.0", "method": "wait", "id": "v"}')
    )

    async def pending() -> list[str]:
        # the id an attacker would guess (ids are <process id>-<counter>); read here
        # so the test is deterministic
        while not bus.dispatcher.correlator._pending:
            await asyncio.sleep(0.01)
        return list(bus.dispatcher.correlator._pending)

    (request_id,) = await asyncio.wait_for(pending(), WAIT)
    forged = {
        "specversion": "1.0",
        "id": "forged-1",
        "source": "/outside",
        "type": f"{bus.adaptor.prefix}.common.response",
        "mcptype": "response",
        "collaborationid": request_id,
        "replyto": bus.reply_topic,
        "datacontenttype": "application/json",
        "data": {"jsonrpc": "2.0", "result": "forged", "id": "v"},
    }
    posted = await asyncio.wait_for(
        client.post("/events", content=orjson.dumps(forged), headers=CE_JSON), WAIT
    )
    RELEASE.set()
    answer = await asyncio.wait_for(victim, WAIT)
    assert answer.json() == {"jsonrpc": "2.0", "result": "real", "id": "v"}
    assert posted.status_code == 400, posted.text
    assert "'forged-1' refused: a response cannot enter the bus" in posted.json()["error"]


@pytest.mark.parametrize("kind", ["mcptype", "type-only"])
async def test_a_response_event_is_refused_wherever_it_would_go(
    bus: Bus, client: httpx.AsyncClient, kind: str
) -> None:
    transport = bus.transport
    assert isinstance(transport, MemoryTransport)
    writes = dict(transport.writes)
    event: dict[str, Any] = {
        "specversion": "1.0",
        "id": "r-1",
        "source": "/outside",
        "type": f"{bus.adaptor.prefix}.common.response",
        "targetagent": "spec",
        "data": {"jsonrpc": "2.0", "result": 1, "id": "x"},
    }
    if kind == "mcptype":
        event["mcptype"] = "response"
    response = await client.post("/events", content=orjson.dumps(event), headers=CE_JSON)
    assert response.status_code == 400, response.text
    assert "a response cannot enter the bus" in response.json()["error"]
    assert transport.writes == writes
