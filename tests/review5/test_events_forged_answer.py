"""``POST /events`` accepts a response event aimed at the bus's own reply topic, so a
caller can answer another caller's pending request with a result of its choosing.

A native event with ``mcptype: response``, a ``collaborationid`` and ``replyto``
naming the gateway bus's reply topic (``<prefix>.reply.<node>``, an internal topic:
docs/gateway.md lists ``.reply.*`` among the bus's own topics the ingress will not
write to) is routed to that topic and published (202). The correlator takes it as
the answer of the pending request with that id, so the caller who is waiting gets
the forged result and the agent's real answer is dropped as late. Request ids are
``<process id>-<counter>``, so the next ones are easy to guess once one is seen. With
tokens, no allow-list applies (the event reaches no agent and no subject). Correct:
``POST /events`` refuses (4xx) an event that would be delivered on a reply topic (or
any of the bus's own topics other than an agent's inbox and a subject), and the
waiting caller gets the agent's answer.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest

from a2a_bus import Agent, method
from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.ingress import Ingress

from .conftest import WAIT

pytestmark = pytest.mark.timeout(120)

RELEASE = threading.Event()


class Slow(Agent):
    agent_id = "slow"

    @method
    def wait(self) -> str:
        RELEASE.wait(WAIT)  # bounded: never hangs the test
        return "real"


@pytest.fixture
async def slow_bus() -> AsyncIterator[Bus]:
    RELEASE.clear()
    async with Bus.memory(prefix=f"r{uuid.uuid4().hex[:10]}") as made:
        await made.aspawn(Slow)
        yield made
    RELEASE.set()


async def test_a_posted_response_event_cannot_answer_another_callers_request(
    slow_bus: Bus,
) -> None:
    bus = slow_bus
    app = create_app(bus, GatewaySettings(request_timeout=WAIT))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        victim = asyncio.create_task(
            http.post("/rpc", content=b'{"jsonrpc": "2.0", "method": "wait", "id": "v"}')
        )

        async def pending() -> list[str]:
            # the id the attacker would guess; read here so the test is deterministic
            while not bus.correlator._pending:
                await asyncio.sleep(0.01)
            return list(bus.correlator._pending)

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
            http.post(
                "/events",
                content=orjson.dumps(forged),
                headers={"content-type": "application/cloudevents+json"},
            ),
            WAIT,
        )
        RELEASE.set()
        answer = await asyncio.wait_for(victim, WAIT)
    assert answer.json() == {"jsonrpc": "2.0", "result": "real", "id": "v"}
    assert 400 <= posted.status_code < 500, posted.text


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def slow_either_bus(request: pytest.FixtureRequest) -> AsyncIterator[Bus]:
    RELEASE.clear()
    prefix = f"r{uuid.uuid4().hex[:10]}"
    if request.param == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        made = Bus.kafka(bootstrap, bus_options={"prefix": prefix}, metadata_max_age_ms=1000)
    else:
        made = Bus.memory(prefix=prefix)
    async with made:
        await made.aspawn(Slow)
        yield made
    RELEASE.set()


async def test_an_ingress_response_event_cannot_answer_another_callers_request(
    slow_either_bus: Bus,
) -> None:
    """The same through the Kafka ingress: a structured response event produced on
    ``<prefix>.ingress`` with ``replyto`` naming a bus's reply topic is delivered
    there and answers that bus's pending request. The ingress refuses ``reply-to``
    headers naming ``.reply.*`` topics, but not the event's own ``replyto``. Correct:
    dead-lettered as unroutable; the caller gets the agent's answer."""
    bus = slow_either_bus
    client = bus.async_client()
    async with Ingress(bus, timeout=WAIT) as ingress:
        victim = asyncio.create_task(client.request("slow", "wait", [], timeout=WAIT))

        async def pending() -> list[str]:
            while not bus.correlator._pending:
                await asyncio.sleep(0.01)
            return list(bus.correlator._pending)

        (request_id,) = await asyncio.wait_for(pending(), WAIT)
        forged = {
            "specversion": "1.0",
            "id": "forged-2",
            "source": "/outside",
            "type": f"{bus.adaptor.prefix}.common.response",
            "mcptype": "response",
            "collaborationid": request_id,
            "replyto": bus.reply_topic,
            "datacontenttype": "application/json",
            "data": {"jsonrpc": "2.0", "result": "forged", "id": 1},
        }
        await bus.transport.publish_raw(ingress.topic, orjson.dumps(forged))
        dead_before = bus.transport.dead_lettered

        async def refused_or_answered() -> None:
            while bus.transport.dead_lettered == dead_before and not victim.done():
                await asyncio.sleep(0.01)

        await asyncio.wait_for(refused_or_answered(), WAIT)
        RELEASE.set()
        result = await asyncio.wait_for(victim, WAIT)
    assert result == "real"
