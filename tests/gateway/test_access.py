"""Bearer tokens, per-token allow-lists, body and batch limits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from cloudevents.core.bindings.http import to_structured
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.gateway import Access, GatewaySettings

pytestmark = pytest.mark.timeout(60)

ADMIN, LIMITED = "admin-token", "limited-token"


@pytest.fixture
def settings() -> GatewaySettings:
    return GatewaySettings(
        request_timeout=20,
        max_body_bytes=64 * 1024,
        max_batch=5,
        tokens={
            ADMIN: Access(name="admin"),
            LIMITED: Access(
                name="limited",
                agents=("echo", "spec"),
                methods=("echo", "sub*", "get_data"),
                topics=("news.*",),
            ),
        },
    )


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def call(method: str, params: Any = None, id: Any = 1, agent: str | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        message["params"] = params
    if agent is not None:
        message.setdefault("params", {})["_agentId"] = agent
    return orjson.dumps(message)


@pytest.mark.parametrize("headers", [{}, bearer("wrong"), {"authorization": ADMIN}])
async def test_missing_or_wrong_token_gets_401(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await client.post("/rpc", content=call("echo", ["x"]), headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == -32004
    events = await client.post("/events", content=b"{}", headers=headers)
    assert events.status_code == 401
    agents = await client.get("/agents", headers=headers)
    assert agents.status_code == 401


async def test_valid_token_is_served(client: httpx.AsyncClient) -> None:
    response = await client.post("/rpc", content=call("echo", ["hi"]), headers=bearer(ADMIN))
    assert response.json() == {"jsonrpc": "2.0", "result": "hi", "id": 1}


async def test_allow_lists_refuse_agents_and_methods_per_element(
    client: httpx.AsyncClient,
) -> None:
    batch = (
        b"["
        + b",".join(
            [
                call("echo", ["ok"], id=1),
                call("reveal", id=2),  # method not allowed
                call("get_data", id=3, agent="secret"),  # agent not allowed
                call("subtract", [5, 3], id=4),
            ]
        )
        + b"]"
    )
    response = await client.post("/rpc", content=batch, headers=bearer(LIMITED))
    assert response.status_code == 200
    by_id = {r["id"]: r for r in response.json()}
    assert by_id[1]["result"] == "ok"
    assert by_id[4]["result"] == 2
    assert by_id[2]["error"]["code"] == -32003
    assert "method 'reveal'" in by_id[2]["error"]["data"]
    assert by_id[3]["error"]["code"] == -32003
    assert "agent 'secret'" in by_id[3]["error"]["data"]
    # The same calls pass with an unrestricted token.
    response = await client.post("/rpc", content=call("reveal", id=2), headers=bearer(ADMIN))
    assert response.json()["result"] == "the secret"


async def test_allow_lists_refuse_topics_on_events_with_403(
    client: httpx.AsyncClient, seen: list[Any]
) -> None:
    fmt = JSONFormat()
    allowed = CloudEvent({"id": "a", "source": "s", "type": "t", "subject": "news.eu"}, {})
    refused = CloudEvent({"id": "b", "source": "s", "type": "t", "subject": "orders.eu"}, {})
    for event, status in ((refused, 403), (allowed, 202)):
        message = to_structured(event, fmt)
        headers = {**message.headers, **bearer(LIMITED)}
        response = await client.post("/events", content=message.body, headers=headers)
        assert response.status_code == status, response.text


async def test_agent_list_shows_only_allowed_agents(client: httpx.AsyncClient) -> None:
    limited = (await client.get("/agents", headers=bearer(LIMITED))).json()["agents"]
    assert sorted(card["id"] for card in limited) == ["echo", "spec"]
    admin = (await client.get("/agents", headers=bearer(ADMIN))).json()["agents"]
    assert sorted(card["id"] for card in admin) == ["echo", "secret", "spec"]
    hidden = await client.get("/agents/secret", headers=bearer(LIMITED))
    assert hidden.status_code == 404


async def test_body_over_the_limit_gets_413_before_it_is_read_in_full(
    client: httpx.AsyncClient,
) -> None:
    chunk = b" " * 16 * 1024
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        while pulled < 1000:  # 16 MB if the gateway read it all
            pulled += 1
            yield chunk

    response = await client.post("/rpc", content=endless(), headers=bearer(ADMIN))
    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32005
    assert pulled <= 6  # 64 KiB limit: stopped right after the chunk that crossed it


async def test_declared_length_over_the_limit_gets_413(client: httpx.AsyncClient) -> None:
    body = call("echo", ["x" * 70_000])
    response = await client.post("/events", content=body, headers=bearer(ADMIN))
    assert response.status_code == 413
    assert "65536" in response.json()["error"]


async def test_batch_over_the_limit_is_one_invalid_request(client: httpx.AsyncClient) -> None:
    batch = b"[" + b",".join(call("echo", [n], id=n) for n in range(6)) + b"]"
    response = await client.post("/rpc", content=batch, headers=bearer(ADMIN))
    assert response.status_code == 200
    answer = response.json()
    assert answer["error"]["code"] == -32600
    assert "limit is 5" in answer["error"]["data"]
