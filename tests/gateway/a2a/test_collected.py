"""An A2A ``message/send`` of a streaming method: the chunks go onto the task's
artifact, which keeps at most ``max_body_bytes`` of JSON (then it says it was cut);
the task runs to its end whoever waits for it."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from a2a_bus.gateway import GatewaySettings

from .. import agents
from ..conftest import WAIT

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


async def test_chunks_over_the_limit_are_kept_bounded_and_marked(client: httpx.AsyncClient) -> None:
    agents.COUNTED["last"] = -1
    response = await client.post("/a2a/echo", content=send(1000))
    assert response.status_code == 200
    task = response.json()["result"]
    assert task["status"]["state"] == "completed"
    # Only what the bound let through is on the task, and the artifact says so.
    kept = numbers(task)
    assert kept == list(range(len(kept))) and 0 < len(kept) < 1000
    metadata = task["artifacts"][0]["metadata"]
    assert metadata["truncated"] is True and metadata["maxBytes"] == LIMIT
    assert metadata["omittedParts"] == 1000 - len(kept)
    assert agents.COUNTED["last"] == 999, "the agent's run is the task's: it ran to its end"
    # The same call over message/stream gets every chunk.
    streamed = await client.post(
        "/a2a/echo",
        content=send(200, method="message/stream").replace(b'"m1"', b'"m2"'),
        headers={"accept": "text/event-stream"},
    )
    assert streamed.text.count('"artifact-update"') == 200
