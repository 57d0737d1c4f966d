"""A2A tasks are private to the token that created them, told apart by the token itself,
not by its ``name``: two tokens with the default name, or the same ``name`` in a
tokens file, do not see or cancel each other's tasks."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway import Access, GatewaySettings, create_app
from tests.gateway.agents import Echo

pytestmark = pytest.mark.timeout(60)

WAIT = 20.0  # seconds; a guard against hangs, never a performance limit
ALICE = "alice-" + uuid.uuid4().hex
MALLORY = "mallory-" + uuid.uuid4().hex


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    async with Bus.memory() as running:
        await running.aspawn(Echo, 1, [])
        yield running


async def call(http: httpx.AsyncClient, token: str, method: str, params: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"authorization": f"Bearer {token}"}
    response = await asyncio.wait_for(
        http.post("/a2a/echo", content=orjson.dumps(body), headers=headers), WAIT
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize(
    "tokens",
    [
        # Tokens made in code with no name: both are "anonymous".
        {ALICE: Access(), MALLORY: Access(agents=("echo",))},
        # A tokens file where two people were given the same display name.
        {ALICE: Access(name="ops"), MALLORY: Access(name="ops", agents=("echo",))},
    ],
    ids=["default-names", "same-name"],
)
async def test_another_token_does_not_see_or_cancel_a_task(
    bus: Bus, tokens: dict[str, Access]
) -> None:
    """Mallory's GetTask and CancelTask of Alice's task answer -32001, as for any other
    token (she used to get the task, history and answer included)."""
    app = create_app(bus, GatewaySettings(request_timeout=WAIT, tokens=tokens))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        secret = "alice's secret " + uuid.uuid4().hex
        message = {
            "kind": "message",
            "messageId": uuid.uuid4().hex,
            "role": "user",
            "parts": [{"kind": "text", "text": secret}],
        }
        sent = await call(http, ALICE, "message/send", {"message": message})
        task_id = sent["result"]["id"]
        assert sent["result"]["status"]["state"] == "completed"
        # Alice herself sees it.
        own = await call(http, ALICE, "tasks/get", {"id": task_id})
        assert own["result"]["id"] == task_id

        seen = await call(http, MALLORY, "tasks/get", {"id": task_id})
        assert "result" not in seen, f"another token read the task: {seen}"
        assert seen["error"]["code"] == -32001
