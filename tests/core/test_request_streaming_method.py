"""``request`` (not ``stream``) on a generator method: the result is the list of all
chunks, as the gateway answers it without SSE. Both transports, both clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from a2a_bus import Agent, Bus, Call, JsonRpcError, method
from a2a_bus.core.service import collect
from tests.agents import Calc, Ticker
from tests.buses import WAIT, eventually, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]


class Faulty(Agent):
    agent_id = "faulty"

    @method
    def fail_after(self, n: int) -> Iterator[int]:
        """``n`` items, then a JSON-RPC error."""
        yield from range(n)
        raise JsonRpcError(-32010, "ran dry", {"after": n})


async def test_request_returns_every_chunk(make_bus: MakeBus) -> None:
    bus = await make_bus(Calc)
    client = bus.async_client()
    assert await asyncio.wait_for(client.request("calc", "count", [5]), WAIT) == [0, 1, 2, 3, 4]
    assert await asyncio.wait_for(client.request("calc", "count", {"n": 0}), WAIT) == []
    # Routed by method, and enough chunks that the reply topic carries many records.
    assert await asyncio.wait_for(client.request(None, "count", [1000]), WAIT) == list(range(1000))
    assert bus.metrics.duplicate_replies == 0
    assert bus.metrics.late_replies == 0


async def test_call_and_batch_answer_with_the_list(make_bus: MakeBus) -> None:
    bus = await make_bus(Calc)
    client = bus.async_client()
    message = {"jsonrpc": "2.0", "id": "a", "method": "count", "params": {"n": 3}}
    assert await asyncio.wait_for(client.call(message), WAIT) == {
        "jsonrpc": "2.0",
        "result": [0, 1, 2],
        "id": "a",
    }
    results = await asyncio.wait_for(
        client.batch([Call("calc", "count", [2]), Call("calc", "subtract", [3, 1])]), WAIT
    )
    assert results == [[0, 1], 2]


async def test_an_error_after_some_chunks_is_the_answer(make_bus: MakeBus) -> None:
    bus = await make_bus(Faulty)
    with pytest.raises(JsonRpcError) as error:
        await asyncio.wait_for(bus.async_client().request("faulty", "fail_after", [3]), WAIT)
    assert (error.value.code, error.value.message, error.value.data) == (
        -32010,
        "ran dry",
        {"after": 3},
    )


async def test_too_much_to_gather_is_refused_and_the_generator_stopped(
    make_bus: MakeBus,
) -> None:
    bus = await make_bus(Ticker)
    caller = await make_bus(peer=bus)  # another node: the cancel travels the transport
    caller.dispatcher.correlator.collect_max_bytes = 1000
    limit = 1_000_000  # bounded: without the cancel the generator runs to the end
    with pytest.raises(JsonRpcError) as error:
        await asyncio.wait_for(caller.async_client().request("ticker", "tick", [limit]), WAIT)
    assert error.value.code == -32005
    assert "limit of 1000 bytes" in error.value.data
    assert "stream()" in error.value.data
    await eventually(Ticker.done.is_set)
    assert Ticker.closed_early.is_set()
    assert Ticker.produced < limit


async def test_a_caller_that_gives_up_stops_the_generator(make_bus: MakeBus) -> None:
    bus = await make_bus(Ticker)
    caller = await make_bus(peer=bus)
    caller.dispatcher.correlator.collect_max_bytes = 1 << 40
    limit = 10_000_000
    task = asyncio.ensure_future(caller.async_client().request("ticker", "tick", [limit]))
    await eventually(lambda: Ticker.produced > 300)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT)
    await eventually(Ticker.done.is_set)
    assert Ticker.closed_early.is_set()
    assert Ticker.produced < limit


def test_sync_client_returns_every_chunk() -> None:
    with Bus.memory(heartbeat=60.0) as bus:
        bus.spawn(Calc)
        assert bus.client().request("calc", "count", [4]) == [0, 1, 2, 3]
        assert bus.metrics.duplicate_replies == 0


# -- collect: the same rules for a stream of JSON-RPC responses (the gateway's form) ----


async def _responses(
    items: list[dict[str, Any]], closed: list[bool]
) -> AsyncGenerator[dict[str, Any], None]:
    try:
        for item in items:
            yield item
    finally:
        closed.append(True)


async def test_collect_gathers_results_into_one_response() -> None:
    closed: list[bool] = []
    chunks = [{"jsonrpc": "2.0", "result": n, "id": 7} for n in range(3)]
    response = await collect(_responses(chunks, closed), 7)
    assert response == {"jsonrpc": "2.0", "result": [0, 1, 2], "id": 7}
    assert closed == [True]


async def test_collect_ends_with_an_error_response() -> None:
    closed: list[bool] = []
    failure = {"jsonrpc": "2.0", "error": {"code": -32006, "message": "Stream broken"}, "id": 7}
    chunks = [{"jsonrpc": "2.0", "result": 1, "id": 7}, failure]
    assert await collect(_responses(chunks, closed), 7) == failure
    assert closed == [True]


async def test_collect_refuses_more_than_its_bound_and_closes_the_stream() -> None:
    closed: list[bool] = []
    chunks = [{"jsonrpc": "2.0", "result": "x" * 40, "id": 7} for _ in range(10)]
    response = await collect(_responses(chunks, closed), 7, max_bytes=100)
    assert response["error"]["code"] == -32005
    assert response["error"]["message"] == "Response too large"
    assert "after 2 chunks" in response["error"]["data"]
    assert response["id"] == 7
    assert closed == [True]
