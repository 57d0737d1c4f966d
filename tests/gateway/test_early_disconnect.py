"""Clients that leave early or never finish: streaming endpoints whose client is gone
before the first byte close whatever the request opened (a subject's live view, an A2A
task's run); a body that stops halfway is answered 408 after the request timeout, or,
when its client left, quietly (no error logged, no 500 counted); a HEAD of a live
view opens nothing.

The client is a raw ASGI caller: it sends the request, then reports the disconnect
(or nothing more), as a server does for a connection closed (or stalled).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from starlette.applications import Starlette
from starlette.types import Message

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from tests.buses import eventually

from .conftest import WAIT

pytestmark = pytest.mark.timeout(60)


async def call_and_vanish(app: Starlette, method: str, path: str, body: bytes = b"") -> None:
    """Run one request through the gateway app with a client that leaves at once."""
    incoming: list[Message] = [
        {"type": "http.request", "body": body, "more_body": False},
        {"type": "http.disconnect"},
    ]
    await asgi_call(app, method, path, incoming)


async def asgi_call(
    app: Starlette, method: str, path: str, incoming: list[Message]
) -> list[Message]:
    """Run one request whose client sends ``incoming``, then nothing more; what the
    app sent back."""
    sent: list[Message] = []

    async def receive() -> Message:
        if incoming:
            return incoming.pop(0)
        await asyncio.Event().wait()  # nothing more ever arrives
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)
        await asyncio.sleep(0)  # a real server's send yields to the loop

    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"gateway"), (b"accept", b"text/event-stream")],
        "client": ("127.0.0.1", 50000),
        "server": ("gateway", 80),
    }
    await asyncio.wait_for(app(scope, receive, send), WAIT)
    return sent


def status_of(sent: list[Message]) -> int:
    return int(next(m["status"] for m in sent if m["type"] == "http.response.start"))


def tail_groups(bus: Bus) -> list[str]:
    return [group for group in bus.transport.lag() if ".tail." in group]


@pytest.fixture
def app(bus: Bus) -> Starlette:
    return create_app(bus, GatewaySettings(request_timeout=WAIT))


async def test_a_tail_whose_client_left_before_the_first_byte_unsubscribes(
    bus: Bus, app: Starlette
) -> None:
    for _ in range(3):
        await call_and_vanish(app, "GET", "/topics/news.sport/events")
    await eventually(lambda: not tail_groups(bus), "the live views to unsubscribe")


async def test_an_a2a_stream_whose_client_left_before_the_first_byte_is_canceled(
    bus: Bus, app: Starlette
) -> None:
    call = {"method": "count", "params": {"n": 2000, "pause": 0.001}}
    message = {
        "kind": "message",
        "messageId": "m-1",
        "role": "user",
        "parts": [{"kind": "data", "data": call}],
    }
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/stream",
        "params": {"message": message},
    }
    await call_and_vanish(app, "POST", "/a2a/echo", orjson.dumps(request))
    # The run stops and its bus stream is closed (the agent is told to stop).
    await eventually(lambda: bus.metrics.in_flight == 0, "the task's bus stream to be closed")


HALF_A_CALL: Message = {"type": "http.request", "body": b'{"jsonrpc": "2.0", ', "more_body": True}


@pytest.mark.parametrize("path", ["/rpc", "/events", "/a2a/echo"])
async def test_a_body_that_stops_halfway_is_answered_408_after_the_request_timeout(
    bus: Bus, path: str
) -> None:
    impatient = create_app(bus, GatewaySettings(request_timeout=0.2))
    sent = await asgi_call(impatient, "POST", path, [HALF_A_CALL])
    assert status_of(sent) == 408


@pytest.mark.parametrize("path", ["/rpc", "/events", "/a2a/echo"])
async def test_a_client_that_leaves_halfway_through_its_body_is_no_server_error(
    app: Starlette, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    sent = await asgi_call(app, "POST", path, [HALF_A_CALL, {"type": "http.disconnect"}])
    assert status_of(sent) == 499
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_a_head_of_a_live_view_opens_nothing_and_the_next_request_is_answered(
    bus: Bus, app: Starlette, served_port: int
) -> None:
    """A HEAD's answer has no body, so a live view behind it would never notice its
    client left: with a request after it on the same connection, that view (and the
    request) hung for good."""
    reader, writer = await asyncio.open_connection("127.0.0.1", served_port)
    writer.write(
        b"HEAD /topics/news.sport/events HTTP/1.1\r\nHost: gateway\r\n\r\n"
        b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n"
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head
    health = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    assert health.startswith(b"HTTP/1.1 200")
    writer.close()
    assert not tail_groups(bus)
    bad = await asgi_call(app, "HEAD", "/topics/news..sport/events", [])
    assert status_of(bad) == 400
