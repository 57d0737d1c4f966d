"""POST /rpc: every example of the JSON-RPC 2.0 specification's "Examples" section,
integers outside -2**63 .. 2**64-1 refused rather than read as floats (-32600, id
null, a ``data`` naming the integer), and params bounded as the client bounds them
(not the whole message; both transports, Kafka: the real broker).

The expected answers are the specification's own. Responses in a batch may come
in any order, so batches are compared by id. Error objects may carry ``data``
(a human-readable detail); code, message and id must be the specification's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson
import pytest

from a2a_bus import Bus
from a2a_bus.core.payload import MAX_PAYLOAD_BYTES
from a2a_bus.gateway import GatewaySettings, create_app
from tests.agents import Echo
from tests.buses import WAIT, make_bus

from . import agents
from .conftest import HUGE, HUGE_ID_REQUEST, refused_as_out_of_range

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

pytestmark = pytest.mark.timeout(60)

MakeBus = Callable[..., Awaitable[Bus]]

INVALID_REQUEST = {"code": -32600, "message": "Invalid Request"}
PARSE_ERROR = {"code": -32700, "message": "Parse error"}
METHOD_NOT_FOUND = {"code": -32601, "message": "Method not found"}


def error(body: dict[str, Any], id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": body, "id": id}


def result(value: Any, id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "result": value, "id": id}


#: (name, request body, expected response: a dict, a list (batch) or None (no body)).
EXAMPLES: list[tuple[str, str, Any]] = [
    (
        "positional parameters (1)",
        '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
        result(19, 1),
    ),
    (
        "positional parameters (2)",
        '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
        result(-19, 2),
    ),
    (
        "named parameters (1)",
        '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42},'
        ' "id": 3}',
        result(19, 3),
    ),
    (
        "named parameters (2)",
        '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23},'
        ' "id": 4}',
        result(19, 4),
    ),
    ("a notification", '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}', None),
    ("a notification without params", '{"jsonrpc": "2.0", "method": "foobar"}', None),
    (
        "non-existent method",
        '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}',
        error(METHOD_NOT_FOUND, "1"),
    ),
    (
        "invalid JSON",
        '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]',
        error(PARSE_ERROR, None),
    ),
    (
        "invalid Request object",
        '{"jsonrpc": "2.0", "method": 1, "params": "bar"}',
        error(INVALID_REQUEST, None),
    ),
    (
        "batch, invalid JSON",
        '[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},'
        '{"jsonrpc": "2.0", "method"]',
        error(PARSE_ERROR, None),
    ),
    ("an empty Array", "[]", error(INVALID_REQUEST, None)),
    ("an invalid Batch (but not empty)", "[1]", [error(INVALID_REQUEST, None)]),
    ("invalid Batch", "[1,2,3]", [error(INVALID_REQUEST, None)] * 3),
    (
        "Batch",
        """[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
        ]""",
        [
            result(7, "1"),
            result(19, "2"),
            error(INVALID_REQUEST, None),
            error(METHOD_NOT_FOUND, "5"),
            result(["hello", 5], "9"),
        ],
    ),
    (
        "Batch (all notifications)",
        """[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
        ]""",
        None,
    ),
]


def comparable(response: dict[str, Any]) -> dict[str, Any]:
    """The response with ``error.data`` left out (the spec leaves it to the server)."""
    if "error" in response:
        error = {k: v for k, v in response["error"].items() if k != "data"}
        return {**response, "error": error}
    return response


def key(response: dict[str, Any]) -> bytes:
    return orjson.dumps(comparable(response), option=orjson.OPT_SORT_KEYS)


@pytest.mark.parametrize(
    ("body", "expected"), [(b, e) for _, b, e in EXAMPLES], ids=[n for n, _, _ in EXAMPLES]
)
async def test_specification_example(client: httpx.AsyncClient, body: str, expected: Any) -> None:
    response = await client.post("/rpc", content=body, headers={"content-type": "application/json"})
    if expected is None:
        assert response.status_code == 204
        assert response.content == b""
        return
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    answer = response.json()
    if isinstance(expected, list):
        assert isinstance(answer, list)
        assert sorted(map(key, answer)) == sorted(map(key, expected))
    else:
        assert comparable(answer) == expected


@pytest.mark.parametrize(
    ("body", "id"),
    [
        ({"jsonrpc": "1.0", "method": "echo", "params": [1], "id": "v1"}, "v1"),
        ({"jsonrpc": "2.0", "params": [1], "id": 4}, 4),
        ({"jsonrpc": "2.0", "method": ["echo"], "id": 2.5}, 2.5),
        ({"jsonrpc": "2.0", "method": "echo", "params": "p", "id": None}, None),
        ({"jsonrpc": "1.0", "method": "echo", "id": {"not": "an id"}}, None),
        ({"jsonrpc": "1.0", "method": "echo", "id": True}, None),
        # routing members go in params: beside it, the call would be routed by method
        ({"jsonrpc": "2.0", "method": "echo", "params": [1], "_agentId": "echo", "id": 9}, 9),
    ],
)
async def test_an_invalid_request_is_answered_with_its_readable_id(
    client: httpx.AsyncClient, body: dict[str, Any], id: Any
) -> None:
    """JSON-RPC asks for a null id only when the id cannot be detected."""
    answer = await _rpc(client, orjson.dumps(body))
    assert comparable(answer) == error(INVALID_REQUEST, id)


async def test_notifications_reach_the_agent_and_get_no_answer(client: httpx.AsyncClient) -> None:
    agents.NOTIFIED.clear()
    body = (
        '[{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},'
        '{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]'
    )
    response = await client.post("/rpc", content=body)
    assert response.status_code == 204

    async def arrived() -> None:
        while len(agents.NOTIFIED) < 2:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(arrived(), 20)
    assert sorted(agents.NOTIFIED) == [("notify_hello", (7,)), ("notify_sum", (1, 2, 4))]


# -- integers outside -2**63 .. 2**64-1 are refused, not read as floats --------------------


async def _rpc(client: httpx.AsyncClient, body: bytes) -> Any:
    response = await asyncio.wait_for(
        client.post("/rpc", content=body, headers={"content-type": "application/json"}), WAIT
    )
    assert response.status_code == 200, response.text
    return json.loads(response.text)  # the stdlib keeps big integers exact


async def test_rpc_refuses_a_huge_integer_id(client: httpx.AsyncClient) -> None:
    answer = await _rpc(client, HUGE_ID_REQUEST)
    assert refused_as_out_of_range(answer, HUGE), answer


@pytest.mark.parametrize("value", [HUGE, -(2**63) - 1, 10**30])
async def test_rpc_refuses_a_huge_integer_param(client: httpx.AsyncClient, value: int) -> None:
    body = b'{"jsonrpc": "2.0", "method": "echo", "params": [%d], "id": 1}' % value
    answer = await _rpc(client, body)
    assert refused_as_out_of_range(answer, value), answer


async def test_rpc_refuses_a_batch_holding_a_huge_integer_as_a_whole(
    client: httpx.AsyncClient,
) -> None:
    body = b'[{"jsonrpc": "2.0", "method": "echo", "params": [1], "id": 1}, %s]' % HUGE_ID_REQUEST
    answer = await _rpc(client, body)
    # One error object, as for unparsable JSON.
    assert refused_as_out_of_range(answer, HUGE), answer


@pytest.mark.parametrize("value", [2**64 - 1, -(2**63), 2**63])
async def test_rpc_passes_integers_at_the_limits_on_exactly(
    client: httpx.AsyncClient, value: int
) -> None:
    body = b'{"jsonrpc": "2.0", "method": "echo", "params": [%d], "id": %d}' % (value, value)
    answer = await _rpc(client, body)
    assert answer == {"jsonrpc": "2.0", "result": value, "id": value}
    assert type(answer["result"]) is int


async def test_rpc_passes_long_digit_strings_and_floats_on(client: httpx.AsyncClient) -> None:
    params = {"value": {"text": str(HUGE) * 3, "float": 1.5e300, "fraction": 0.1}}
    body = b'{"jsonrpc": "2.0", "method": "echo", "params": %s, "id": "s"}' % orjson.dumps(params)
    answer = await _rpc(client, body)
    assert answer == {"jsonrpc": "2.0", "result": params["value"], "id": "s"}


# -- params are bounded as the client bounds them ------------------------------------------


@pytest.mark.timeout(300)  # a Kafka bus starts: the default guard
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
