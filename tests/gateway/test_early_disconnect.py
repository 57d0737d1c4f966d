"""Streaming endpoints whose client is gone before the first byte: whatever the request
opened (a subject's live view, an A2A task's run) is closed all the same.

The client is a raw ASGI caller: it sends the request, then at once reports the
disconnect, as a server does for a connection closed right after the request.
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
