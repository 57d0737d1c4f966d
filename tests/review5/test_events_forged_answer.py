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
