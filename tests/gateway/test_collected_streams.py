"""A streaming method called without SSE: its chunks are collected into one answer,
up to a size limit, and only while the client is still there."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import orjson
import pytest
import uvicorn

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app

from . import agents
from .conftest import WAIT

pytestmark = pytest.mark.timeout(120)

LIMIT = 300  # bytes: "[0,1,...,99]" is 290, two hundred chunks are more


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


def count(n: int, pause: float = 0.0) -> bytes:
    params = {"n": n, "pause": pause}
    return orjson.dumps({"jsonrpc": "2.0", "method": "count", "params": params, "id": 7})


async def test_a_list_within_the_limit_is_the_answer(client: httpx.AsyncClient) -> None:
    response = await client.post("/rpc", content=count(100))
    assert response.json() == {"jsonrpc": "2.0", "result": list(range(100)), "id": 7}


async def test_a_list_over_the_limit_is_an_error_and_the_stream_is_closed(
    client: httpx.AsyncClient, bus: Bus
) -> None:
    agents.COUNTED["last"] = -1
    response = await client.post("/rpc", content=count(1000, pause=0.002))
    error = response.json()["error"]
    assert response.json()["id"] == 7
    assert error["code"] == -32005
    assert "limit of 300 bytes" in error["data"]
    assert "text/event-stream" in error["data"]
    await until(lambda: bus.metrics.in_flight == 0, "the bus stream to be closed")
    assert agents.COUNTED["last"] < 999, "the generator ran to its end"
    # The same call as Server-Sent Events is not limited.
    streamed = await client.post(
        "/rpc", content=count(200), headers={"accept": "text/event-stream"}
    )
    assert streamed.text.count("event: chunk") == 200


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


async def test_a_client_that_leaves_cancels_the_collection_upstream(port: int, bus: Bus) -> None:
    agents.COUNTED["last"] = -1
    body = count(100_000, pause=0.001)  # minutes of chunks, within the default 1 MiB
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST /rpc HTTP/1.1\r\nhost: gateway\r\ncontent-length: {len(body)}\r\n\r\n"
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
