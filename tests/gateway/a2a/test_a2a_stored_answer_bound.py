"""What a stored A2A task keeps of a plain (not streamed) answer is held to
``max_body_bytes`` of JSON, cut with the same ``{"truncated": true, ...}`` metadata as
a streamed answer; it was stored whole, so the store's memory was set by the bus's
payload bound times ``max_tasks`` rather than by the gateway's limit."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.hosting.agent import Agent, method

pytestmark = pytest.mark.timeout(60)

WAIT = 20.0  # seconds; a guard against hangs, never a performance limit
LIMIT = 4096
SIZE = 200_000


class Blob(Agent):
    """Answers with a large string in one (non-streamed) result."""

    agent_id = "blob"

    @method
    def blob(self, size: int) -> str:
        return "x" * size


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    async with Bus.memory() as running:
        await running.aspawn(Blob)
        yield running


async def test_a_plain_answer_is_stored_within_max_body_bytes(bus: Bus) -> None:
    app = create_app(bus, GatewaySettings(request_timeout=WAIT, max_body_bytes=LIMIT))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:

        async def call(method: str, params: object) -> dict[str, object]:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            response = await asyncio.wait_for(
                http.post("/a2a/blob", content=orjson.dumps(body)), WAIT
            )
            assert response.status_code == 200, response.text
            return dict(response.json())

        message = {
            "kind": "message",
            "messageId": uuid.uuid4().hex,
            "role": "user",
            "parts": [{"kind": "data", "data": {"method": "blob", "params": {"size": SIZE}}}],
        }
        sent = await call("message/send", {"message": message})
        task = sent["result"]
        assert isinstance(task, dict) and task["status"]["state"] == "completed", sent
        stored = await call("tasks/get", {"id": task["id"], "historyLength": 0})
    artifacts = stored["result"]["artifacts"]  # type: ignore[index]
    kept = [p["text"] for a in artifacts for p in a["parts"] if "text" in p]
    assert sum(map(len, kept)) <= LIMIT, (
        f"the stored task keeps {sum(map(len, kept))} bytes of answer, over max_body_bytes={LIMIT}"
    )
