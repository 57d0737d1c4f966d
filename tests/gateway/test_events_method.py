"""POST /events: a native event without ``a2amethod`` calls the method its type names
(PROTOCOL.md section 3), for routing and for the methods allow-list."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from a2a_bus.gateway import Access, GatewaySettings

from . import agents
from .conftest import WAIT

pytestmark = pytest.mark.timeout(60)

PREFIX = "org.apache.eventmesh.a2a"
ADMIN, LIMITED = "admin-token", "limited-token"


@pytest.fixture
def settings() -> GatewaySettings:
    return GatewaySettings(
        request_timeout=WAIT,
        tokens={
            ADMIN: Access(name="admin"),
            LIMITED: Access(name="limited", methods=("echo", "notify_*")),
        },
    )


def post(client: httpx.AsyncClient, token: str, **attributes: Any) -> Any:
    event = {"specversion": "1.0", "id": "e-1", "source": "/t", **attributes}
    headers = {"content-type": "application/cloudevents+json", "authorization": f"Bearer {token}"}
    return client.post("/events", content=orjson.dumps(event), headers=headers)


async def test_a_request_type_routes_to_the_method_owner(client: httpx.AsyncClient) -> None:
    response = await post(
        client, ADMIN, type=f"{PREFIX}.echo.req", mcptype="request", data={"value": 1}
    )
    assert response.status_code == 202, response.text
    assert response.json()["accepted"] == [{"id": "e-1", "topic": "a2a.agent.echo"}]


async def test_a_notification_type_reaches_the_method(client: httpx.AsyncClient) -> None:
    agents.NOTIFIED.clear()
    response = await post(
        client, LIMITED, type=f"{PREFIX}.notify_hello", mcptype="notification", data=[7]
    )
    assert response.status_code == 202, response.text

    async def delivered() -> None:
        while not agents.NOTIFIED:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(delivered(), WAIT)
    assert agents.NOTIFIED == [("notify_hello", (7,))]


async def test_the_derived_method_is_held_to_the_allow_list(client: httpx.AsyncClient) -> None:
    response = await post(client, LIMITED, type=f"{PREFIX}.reveal.req", mcptype="request")
    assert response.status_code == 403, response.text
    assert "method 'reveal'" in response.json()["error"]


async def test_unknown_and_foreign_types(client: httpx.AsyncClient) -> None:
    unknown = await post(client, ADMIN, type=f"{PREFIX}.nope.req", mcptype="request")
    assert unknown.status_code == 404, unknown.text
    # A type of its own calls no method: with no targetagent or subject it has nowhere to go.
    foreign = await post(client, ADMIN, type="com.example.news", data={})
    assert foreign.status_code == 400, foreign.text
    assert "no targetagent, subject or method" in foreign.json()["error"]
