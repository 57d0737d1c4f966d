"""A streaming method called without SSE: its chunks are collected into one answer,
up to a size limit, and only while the client is still there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from starlette.types import Message

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from tests.buses import eventually

from . import agents
from .conftest import WAIT

pytestmark = pytest.mark.timeout(120)

LIMIT = 300  # bytes: "[0,1,...,99]" is 290, two hundred chunks are more


@pytest.fixture
def settings() -> GatewaySettings:
    return GatewaySettings(request_timeout=WAIT, max_body_bytes=LIMIT)


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
    await eventually(lambda: bus.metrics.in_flight == 0, "the bus stream to be closed")
    assert agents.COUNTED["last"] < 999, "the generator ran to its end"
    # The same call as Server-Sent Events is not limited.
    streamed = await client.post(
        "/rpc", content=count(200), headers={"accept": "text/event-stream"}
    )
    assert streamed.text.count("event: chunk") == 200


def a2a_send(n: int, pause: float) -> bytes:
    call = {"method": "count", "params": {"n": n, "pause": pause}}
    message = {"messageId": "m1", "role": "user", "parts": [{"kind": "data", "data": call}]}
    params = {"message": message}
    return orjson.dumps({"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": params})


@pytest.mark.parametrize(("path", "request_body"), [("/rpc", count)])  # JSON-RPC without SSE
async def test_a_client_that_leaves_cancels_the_collection_upstream(
    served_port: int, bus: Bus, path: str, request_body: Callable[[int, float], bytes]
) -> None:
    port = served_port
    agents.COUNTED["last"] = -1
    body = request_body(100_000, 0.001)  # minutes of chunks, within the default 1 MiB
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST {path} HTTP/1.1\r\nhost: gateway\r\ncontent-length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    await writer.drain()
    await eventually(lambda: agents.COUNTED["last"] >= 10, "the stream to start")
    assert bus.metrics.in_flight == 1
    writer.close()  # the client goes away without an answer
    await writer.wait_closed()
    await eventually(lambda: bus.metrics.in_flight == 0, "the stream to be cancelled")
    stopped_at = agents.COUNTED["last"]
    assert stopped_at < 99_999
    # Echo handles one message at a time: this answer comes after the generator ended.
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
        answer = await http.post(
            "/rpc", json={"jsonrpc": "2.0", "method": "echo", "params": ["after"], "id": 1}
        )
    assert answer.json()["result"] == "after"
    assert agents.COUNTED["last"] == stopped_at


async def test_a_client_that_leaves_is_recorded_as_gone_not_as_a_failure(
    bus: Bus, settings: GatewaySettings, caplog: pytest.LogCaptureFixture
) -> None:
    """The collection stopped as the client left is no failure of the method: no error
    logged with a traceback, no -32603 counted, status 499 (it was 200, answered to
    nobody with -32603)."""
    agents.COUNTED["last"] = -1
    body: list[Message] = [{"type": "http.request", "body": count(1000, 0.05)}]
    left = asyncio.Event()
    sent: list[Message] = []

    async def receive() -> Message:
        if body:
            return body.pop()
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/rpc",
        "raw_path": b"/rpc",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"gateway"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("gateway", 80),
    }
    calling = asyncio.ensure_future(create_app(bus, settings)(scope, receive, send))
    await eventually(lambda: agents.COUNTED["last"] >= 3, "the stream to start")
    left.set()
    await asyncio.wait_for(calling, WAIT)
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [499]
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    await eventually(lambda: bus.metrics.in_flight == 0, "the stream to be cancelled")


async def test_an_a2a_client_that_leaves_leaves_its_task_running_until_canceled(
    served_port: int, bus: Bus
) -> None:
    agents.COUNTED["last"] = -1
    body = a2a_send(100_000, 0.001)
    _reader, writer = await asyncio.open_connection("127.0.0.1", served_port)
    head = f"POST /a2a/echo HTTP/1.1\r\nhost: gateway\r\ncontent-length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    await writer.drain()
    await eventually(lambda: agents.COUNTED["last"] >= 10, "the stream to start")
    writer.close()  # the client goes away without an answer
    await writer.wait_closed()
    left_at = agents.COUNTED["last"]
    await eventually(lambda: agents.COUNTED["last"] > left_at + 20, "the task to go on")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served_port}", timeout=WAIT) as http:
        listed = await http.post(
            "/a2a/echo", json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        )
        (task,) = listed.json()["result"]["tasks"]
        assert task["status"]["state"] == "TASK_STATE_WORKING"
        canceled = await http.post(
            "/a2a/echo",
            json={"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task["id"]}},
        )
        assert canceled.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    await eventually(lambda: bus.service.dispatcher.running_streams == 0, "the generator to stop")
    assert agents.COUNTED["last"] < 99_999
