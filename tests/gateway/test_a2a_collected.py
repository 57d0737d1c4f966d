"""An A2A ``message/send`` of a streaming method: the chunks are gathered by the same
rules as ``POST /rpc`` without SSE (``max_body_bytes``, -32005 beyond, the bus stream
closed), and a client that leaves before the answer cancels the task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest
import uvicorn

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app

from . import agents
from .conftest import WAIT

pytestmark = pytest.mark.timeout(120)

LIMIT = 600  # bytes: a send request fits; the parts of a thousand chunks do not


@pytest.fixture
def settings() -> GatewaySettings:
    return GatewaySettings(request_timeout=WAIT, max_body_bytes=LIMIT)


async def until(predicate: Callable[[], bool], what: str) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), WAIT)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


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


@pytest.fixture
async def port(bus: Bus) -> AsyncIterator[int]:
    # The default size limit: only the client's leaving can stop this collection.
    app = create_app(bus, GatewaySettings(request_timeout=WAIT))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    await until(lambda: server.started or serving.done(), "uvicorn to start")
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    await asyncio.wait_for(serving, WAIT)


async def test_a_client_that_leaves_a_send_cancels_its_task(port: int, bus: Bus) -> None:
    agents.COUNTED["last"] = -1
    body = send(100_000, pause=0.001)  # minutes of chunks, within the default 1 MiB
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST /a2a/echo HTTP/1.1\r\nhost: gateway\r\ncontent-length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    await writer.drain()
    await until(lambda: agents.COUNTED["last"] >= 10, "the stream to start")
    assert bus.metrics.in_flight == 1
    writer.close()  # the client goes away without an answer
    await writer.wait_closed()
    await until(lambda: bus.metrics.in_flight == 0, "the stream to be cancelled")
    stopped_at = agents.COUNTED["last"]
    assert stopped_at < 99_999
    # Echo handles one message at a time: this answer comes after the generator ended.
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
        answer = await http.post(
            "/rpc", json={"jsonrpc": "2.0", "method": "echo", "params": ["after"], "id": 1}
        )
    assert answer.json()["result"] == "after"
    assert agents.COUNTED["last"] == stopped_at
