"""POST /rpc bounds a request's params, as the client does (not the whole message).

Both transports (Kafka: the real broker), the gateway app reached in-process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import orjson

from a2a_bus import Bus
from a2a_bus.core.payload import MAX_PAYLOAD_BYTES
from a2a_bus.gateway import GatewaySettings, create_app
from tests.agents import Echo
from tests.buses import WAIT, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]


async def test_params_within_the_bound_pass_the_gateway_as_they_pass_the_client(
    make_bus: MakeBus,
) -> None:
    """Params at the bound pass POST /rpc as they pass ``client.request`` (the
    gateway measured the whole message, so a few dozen bytes of envelope pushed
    them over, and its -32005 spoke of a "data" the caller never sent)."""
    bus = await make_bus(Echo)
    value = "x" * (MAX_PAYLOAD_BYTES - len(b'{"value":""}'))
    params = {"value": value}
    assert len(orjson.dumps(params)) == MAX_PAYLOAD_BYTES  # at the bound, not over it
    # The Python client takes these params (the result is the same size: it travels too).
    assert await asyncio.wait_for(bus.async_client().request("echo", "echo", params), WAIT) == value
    app = create_app(bus, GatewaySettings(request_timeout=WAIT))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gateway", timeout=WAIT
    ) as http:
        body = {"jsonrpc": "2.0", "method": "echo", "params": params, "id": 1}
        response = await http.post("/rpc", content=orjson.dumps(body))
    assert response.status_code == 200
    answer = response.json()
    assert "error" not in answer, answer.get("error")
    assert answer["result"] == value
