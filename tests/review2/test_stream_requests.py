"""Review: requests that reach the caller -> agent stream path are never answered.

A message of a method with an ``Iterator`` parameter that carries ``_sessionId``
is taken as a stream chunk, an end or an abort. When such a message is a request
(it has an ``id``) but is not the ``_end`` request, nothing ever answers it: the
caller waits for its whole timeout. Both transports (Kafka: the real broker).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from a2a_bus import Bus, JsonRpcError
from a2a_bus.protocol import ErrorCode
from tests.bus.agents import Calc
from tests.bus.test_behaviour import WAIT, make_bus

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
    """Bug: inbound.py InboundStreams.on_chunk treats every message with _sessionId as
    a chunk unless it has _end, so a *request* (it has an id) that is not the end
    (`{"numbers": [1, 2, 3], "_sessionId": "conv-1"}`, or a chunk sent with an id) is
    put into a stream and never answered: the caller waits out its whole timeout
    (-32001), the same over POST /rpc (the HTTP request hangs 30 s). A request must
    always be answered: with its result (the array is a whole stream) or an error
    saying what is wrong (e.g. -32600/-32602: a chunk must be a notification)."""
    bus = await make_bus(Calc)
    client = bus.async_client()
    session = f"conv-{uuid.uuid4().hex[:8]}"
    message = _message({"_agentId": "calc", "_sessionId": session, **params}, id=7)
    response = await asyncio.wait_for(client.call(message), WAIT + 5)
    assert isinstance(response, dict)
    error = response.get("error")
    assert error is None or error["code"] != ErrorCode.TIMEOUT, response


async def test_an_abort_sent_as_a_request_is_answered(make_bus: MakeBus) -> None:
    """Bug: inbound.py on_chunk returns from the `_abort` branch without answering, so
    an abort sent by hand as a request (`{"_end": true, "_abort": true}` with an id,
    e.g. through POST /rpc) is never answered and the caller times out (-32001).
    Correct: a request is always answered; here the stream's -32006 (or an error
    saying the abort must be a notification)."""
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
    """Bug (error message): stream_to to a method without an Iterator parameter sends
    its chunks as notifications that fail to bind and vanish without a trace, and the
    end is answered -32602 "got an unexpected keyword argument '_end'", naming a
    member the caller never wrote (stream_to adds it). Correct: -32602 saying the
    method takes no stream (no internal member names in the detail)."""
    bus = await make_bus(Calc)
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as raised:
        await asyncio.wait_for(client.stream_to("calc", "subtract", [1, 2]), WAIT + 5)
    assert raised.value.code == ErrorCode.INVALID_PARAMS
    detail = str(raised.value.data)
    assert "_end" not in detail and "_seq" not in detail and "chunk" not in detail, detail
