"""An A2A ``message/send`` of a streaming method: the chunks are gathered by the same
rules as ``POST /rpc`` without SSE (``max_body_bytes``, -32005 beyond, the bus stream
closed). A client that leaves before the answer cancels the task: see
tests/gateway/test_collected_streams.py, which checks it for both paths."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings

from .. import agents
from ..conftest import WAIT, until

pytestmark = pytest.mark.timeout(120)

LIMIT = 600  # bytes: a send request fits; the parts of a thousand chunks do not


@pytest.fixture
def settings() -> GatewaySettings:
    return GatewaySettings(request_timeout=WAIT, max_body_bytes=LIMIT)


def send(n: int, pause: float = 0.0, method: str = "message/send") -> bytes:
    call = {"method": "count", "params": {"n": n, "pause": pause}}
    message = {"messageId": "m1", "role": "user", "parts": [{"kind": "data", "data": call}]}
    body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"message": message}}
    return orjson.dumps(body)


def numbers(task: dict[str, Any]) -> list[Any]:
    return [part["data"]["value"] for part in task["artifacts"][0]["parts"]]


async def test_chunks_within_the_limit_are_the_artifact(client: httpx.AsyncClient) -> None:
    response = await client.post("/a2a/echo", content=send(20))
    task = response.json()["result"]
    assert task["status"]["state"] == "completed"
    assert numbers(task) == list(range(20))


async def test_chunks_over_the_limit_fail_the_task_and_close_the_stream(
    client: httpx.AsyncClient, bus: Bus
) -> None:
    agents.COUNTED["last"] = -1
    response = await client.post("/a2a/echo", content=send(1000, pause=0.002))
    assert response.status_code == 200
    task = response.json()["result"]
    assert task["status"]["state"] == "failed"
    error = task["status"]["message"]["parts"][1]["data"]
    assert (error["code"], error["message"]) == (-32005, "Response too large")
    assert f"limit of {LIMIT} bytes" in error["data"]
    assert "SendStreamingMessage" in error["data"]
    # Only what the limit let through is on the task.
    assert numbers(task) == list(range(len(numbers(task))))
    assert len(orjson.dumps(numbers(task))) <= LIMIT
    await until(lambda: bus.metrics.in_flight == 0, "the bus stream to be closed")
    assert agents.COUNTED["last"] < 999, "the generator ran to its end"
    # The same call over message/stream is not limited.
    streamed = await client.post(
        "/a2a/echo",
        content=send(200, method="message/stream"),
        headers={"accept": "text/event-stream"},
    )
    assert streamed.text.count('"artifact-update"') == 200
