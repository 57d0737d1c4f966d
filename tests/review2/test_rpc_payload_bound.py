"""Review: POST /rpc bounds the whole JSON-RPC message, not its params.

Both transports (Kafka: the real broker), the gateway app reached in-process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import orjson

from a2a_bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.payload import MAX_PAYLOAD_BYTES
from tests.bus.agents import Echo
from tests.bus.test_behaviour import WAIT, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]


async def test_params_within_the_bound_pass_the_gateway_as_they_pass_the_client(
    make_bus: MakeBus,
) -> None:
    """Bug (gateway, low): the bound is documented as 1,000,000 bytes of JSON "per
    params" and `client.request` accepts params of that size, but POST /rpc (through
    AsyncClient.call, which checks the event data, i.e. the whole JSON-RPC message)
    answers -32005 "data is N bytes ..." for the same request: a few dozen bytes of
    envelope (jsonrpc, method, id) push it over, and the detail speaks of a "data"
    the JSON-RPC caller never sent. Correct: the same params pass both ways in, and
    the request is answered with its result."""
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
