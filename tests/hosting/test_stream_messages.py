"""Messages on the caller -> agent stream path that are requests are answered.

A session id alone names a conversation: only a chunk, end or abort (by its
params) takes the stream path, and a request there is always answered. Both
transports (Kafka: the real broker).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from a2a_bus import Bus, JsonRpcError
from a2a_bus.protocol import ErrorCode
from tests.agents import Calc
from tests.buses import WAIT, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]


def _message(params: dict[str, Any], id: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": "collect", "params": params}
    if id is not None:
        message["id"] = id
    return message


@pytest.mark.parametrize(
    "params",
    [
        # A conversation id beside the whole stream as one array: _sessionId is also
        # "the stream or conversation" (PROTOCOL.md section 2).
        {"numbers": [1, 2, 3]},
        # A chunk sent as a request rather than a notification.
        {"_seq": 0, "chunk": 1},
    ],
    ids=["array-with-session", "chunk-as-request"],
)
async def test_a_request_with_a_session_id_is_answered(
    make_bus: MakeBus, params: dict[str, Any]
) -> None:
    """A request with a session id is answered: a whole array is a plain call, a chunk
    sent with an id gets -32600 (a chunk is a notification); it used to wait out the
    caller's timeout."""
    bus = await make_bus(Calc)
    client = bus.async_client()
    session = f"conv-{uuid.uuid4().hex[:8]}"
    message = _message({"_agentId": "calc", "_sessionId": session, **params}, id=7)
    response = await asyncio.wait_for(client.call(message), WAIT + 5)
    assert isinstance(response, dict)
    error = response.get("error")
    assert error is None or error["code"] != ErrorCode.TIMEOUT, response


async def test_an_abort_sent_as_a_request_is_answered(make_bus: MakeBus) -> None:
    """An abort sent as a request is answered with the stream's -32006 (it was never
    answered)."""
    bus = await make_bus(Calc)
    client = bus.async_client()
    session = f"s-{uuid.uuid4().hex[:8]}"
    base = {"_agentId": "calc", "_sessionId": session}
    await client.call(_message({**base, "_seq": 0, "chunk": 1}))
    abort = _message({**base, "_seq": 1, "_end": True, "_abort": True}, id="abort")
    response = await asyncio.wait_for(client.call(abort), WAIT + 5)
    assert isinstance(response, dict)
    error = response.get("error")
    assert error is not None and error["code"] != ErrorCode.TIMEOUT, response


async def test_stream_to_a_method_that_takes_no_stream_names_the_problem(
    make_bus: MakeBus,
) -> None:
    """stream_to to a method without an Iterator parameter is answered -32602 saying
    the method takes no stream (it named '_end', a member the caller never wrote)."""
    bus = await make_bus(Calc)
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as raised:
        await asyncio.wait_for(client.stream_to("calc", "subtract", [1, 2]), WAIT + 5)
    assert raised.value.code == ErrorCode.INVALID_PARAMS
    detail = str(raised.value.data)
    assert "_end" not in detail and "_seq" not in detail and "chunk" not in detail, detail


async def test_a_chunk_whose_item_does_not_fit_ends_the_stream_with_invalid_params(
    make_bus: MakeBus,
) -> None:
    """Each chunk's item is checked against the stream's item type (``Iterator[int]``):
    the handler reads the chunks before it, then the stream fails with -32602 naming
    the chunk, which the handler raises to the caller. Before, it crashed on the
    item (or took it), and the crash was neither retried nor the caller's error."""
    bus = await make_bus(Calc)
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as raised:
        await asyncio.wait_for(client.stream_to("calc", "collect", [1, 2, "3", 4]), WAIT + 5)
    assert (raised.value.code, raised.value.data) == (
        ErrorCode.INVALID_PARAMS,
        "numbers[2]: expected {'type': 'integer'}, got str",
    )
    assert bus.metrics.dead_letters == 0
    answer = await asyncio.wait_for(client.stream_to("calc", "collect", [1, 2]), WAIT + 5)
    assert answer == [1, 2]
