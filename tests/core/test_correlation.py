"""The correlator: deadlines on one timer, answers at most once, late replies counted;
a timeout that is no positive number of seconds is refused, alone and from the client."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from a2a_bus import Agent, Bus, method
from a2a_bus.client import AsyncClient, Call
from a2a_bus.core.correlation import Correlator
from a2a_bus.core.metrics import Metrics
from a2a_bus.core.timeouts import check_timeout
from a2a_bus.protocol import JsonRpcError, new_event
from a2a_bus.transport.base import Delivery
from tests.buses import make_bus

__all__ = ["make_bus"]  # the fixture: the client's tests run on both transports

WAIT = 30.0
MakeBus = Callable[..., Awaitable[Bus]]


async def test_a_shorter_deadline_set_later_still_expires_first() -> None:
    metrics = Metrics()
    correlator = Correlator(metrics)
    slow = correlator.expect("slow", WAIT)
    quick = correlator.expect("quick", 0.02)
    response = await asyncio.wait_for(quick, WAIT)
    assert response["error"]["code"] == -32001
    assert not slow.done() and len(correlator) == 1
    correlator.answer("slow", {"result": 1})
    assert slow.result() == {"result": 1}
    correlator.answer("quick", {"result": 2})  # after its deadline
    correlator.answer("slow", {"result": 3})  # a second answer
    assert (metrics.late_replies, metrics.duplicate_replies, metrics.in_flight) == (1, 1, 0)
    correlator.close()


async def test_many_settled_requests_leave_the_live_deadlines_working() -> None:
    correlator = Correlator(Metrics())
    for n in range(5000):  # answered at once: their deadlines are dropped lazily
        correlator.expect(f"r{n}", WAIT)
        correlator.answer(f"r{n}", {"result": n})
    last = correlator.expect("last", 0.02)
    assert (await asyncio.wait_for(last, WAIT))["error"]["code"] == -32001
    assert len(correlator) == 0
    correlator.close()


async def test_a_streams_deadline_runs_from_its_last_chunk() -> None:
    """Chunks that keep coming keep a stream open through several of its timeouts;
    once they stop, it expires with -32001 after the chunks it got."""
    correlator = Correlator(Metrics())
    stream = correlator.expect_stream("s", 0.5)
    loop = asyncio.get_running_loop()
    until = loop.time() + 1.6  # three timeouts and more
    sent = 0
    while loop.time() < until:
        await asyncio.wait_for(correlator.on_reply(_chunk("s", sent, sent)), WAIT)
        sent += 1
        await asyncio.sleep(0.02)
    assert len(correlator) == 1  # not expired while chunks came
    items: list[object] = []
    with pytest.raises(JsonRpcError) as expired:
        async with asyncio.timeout(WAIT):
            async for item in stream:
                items.append(item)
    assert expired.value.code == -32001 and items == list(range(sent))
    assert len(correlator) == 0
    correlator.close()


def _chunk(request_id: str, seq: int, item: object, *, end: bool = False, run: int = 1) -> Delivery:
    attributes = {
        "id": f"{request_id}-{seq}-{end}-{run}",
        "source": "test",
        "type": "test.response",
        "collaborationid": request_id,
        "seq": seq,
        "streamcontrol": f"node-{run}",
    }
    if end:
        attributes["streamend"] = True
    message = {"jsonrpc": "2.0", "result": {"chunks": seq} if end else item, "id": 1}
    return Delivery(new_event(attributes, message), "a2a.reply.test")


async def test_a_stream_whose_queue_is_full_still_ends() -> None:
    # The reader took nothing while the whole stream arrived: the end marker
    # finds the stream's queue full and must still close it (not raise, not hang).
    correlator = Correlator(Metrics())
    stream = correlator.expect_stream("s", WAIT)
    for seq in range(1024):
        await asyncio.wait_for(correlator.on_reply(_chunk("s", seq, seq)), WAIT)
    await asyncio.wait_for(correlator.on_reply(_chunk("s", 1024, None, end=True)), WAIT)

    async def read() -> list[object]:
        return [item async for item in stream]

    assert await asyncio.wait_for(read(), WAIT) == list(range(1024))
    correlator.close()


async def test_a_stream_whose_queue_is_full_still_fails() -> None:
    # A deadline (or the bus stopping) reaches a stream whose reader fell behind.
    correlator = Correlator(Metrics())
    stream = correlator.expect_stream("s", WAIT)
    for seq in range(1024):
        await asyncio.wait_for(correlator.on_reply(_chunk("s", seq, seq)), WAIT)
    other = correlator.expect("other", WAIT)
    correlator.close()
    assert (await asyncio.wait_for(other, WAIT))["error"]["code"] == -32002
    items: list[object] = []

    async def read() -> None:
        async for item in stream:
            items.append(item)

    with pytest.raises(JsonRpcError) as failure:
        await asyncio.wait_for(read(), WAIT)
    assert failure.value.code == -32002 and items == list(range(1024))


async def test_a_stream_that_starts_over_breaks_and_cancels_its_generator() -> None:
    """A generator run again (its first node died) is not joined to the first run's
    chunks, and the second run is stopped: nobody reads what it sends."""
    stopped: list[tuple[str, str]] = []
    correlator = Correlator(Metrics(), stop_upstream=lambda *sent: stopped.append(sent))
    stream = correlator.expect_stream("s", WAIT)
    for seq in range(2):
        await correlator.on_reply(_chunk("s", seq, f"run 1 item {seq}"))
    await correlator.on_reply(_chunk("s", 0, "run 2 item 0", run=2))
    items: list[object] = []
    with pytest.raises(JsonRpcError) as broken:
        async for item in stream:
            items.append(item)
    assert broken.value.code == -32006 and items == ["run 1 item 0", "run 1 item 1"]
    assert stopped == [("s", "node-2")] and len(correlator) == 0
    correlator.close()


async def test_a_gathered_stream_that_starts_over_is_an_error_not_one_list() -> None:
    """``request`` on a streaming method gathers the chunks into one list: two runs
    of the generator must not make one list."""
    stopped: list[tuple[str, str]] = []
    correlator = Correlator(Metrics(), stop_upstream=lambda *sent: stopped.append(sent))
    answer = correlator.expect("r", WAIT)
    for seq in range(2):
        await correlator.on_reply(_chunk("r", seq, seq))
    await correlator.on_reply(_chunk("r", 0, 0, run=2))
    response = await asyncio.wait_for(answer, WAIT)
    assert response["error"]["code"] == -32006, response
    assert stopped == [("r", "node-2")]
    correlator.close()


@pytest.mark.parametrize("timeout", [0, -1, -0.5, math.nan, "5", None, True, [1]])
async def test_a_timeout_that_is_no_positive_number_of_seconds_is_refused(
    timeout: float,
) -> None:
    """NaN would never end a wait (the caller would hang on a silent agent); 0 or
    less would end it before any answer; a string (``"5"``), a bool or another
    object would fail deep in the loop's timer with a bare TypeError."""
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        check_timeout(timeout)
    correlator = Correlator(Metrics())
    with pytest.raises(ValueError):
        correlator.expect("r", timeout)
    with pytest.raises(ValueError):
        correlator.expect_stream("s", timeout)
    assert len(correlator) == 0
    correlator.close()


class Counter(Agent):
    agent_id = "counter"
    calls = 0

    @method
    def bump(self) -> int:
        Counter.calls += 1
        return Counter.calls

    @method
    def upto(self, n: int) -> Any:
        Counter.calls += 1
        yield from range(n)


async def _drain(client: AsyncClient, timeout: float) -> list[Any]:
    return [item async for item in client.stream("counter", "upto", [2], timeout=timeout)]


CALLS: dict[str, Callable[[AsyncClient, float], Awaitable[Any]]] = {
    "request": lambda client, t: client.request("counter", "bump", timeout=t),
    "call": lambda client, t: client.call(
        {"jsonrpc": "2.0", "id": 1, "method": "bump", "params": {}}, timeout=t
    ),
    "batch": lambda client, t: client.batch([Call("counter", "bump")], timeout=t),
    "stream": _drain,
}


@pytest.mark.timeout(300)  # a Kafka bus starts: the default guard
@pytest.mark.parametrize("way", list(CALLS))
async def test_the_client_refuses_a_bad_timeout_before_sending_and_waits_on_inf(
    make_bus: MakeBus, way: str
) -> None:
    client = (await make_bus(Counter)).async_client()
    Counter.calls = 0
    for bad in (0, math.nan):
        with pytest.raises(ValueError, match="positive number of seconds"):
            await asyncio.wait_for(CALLS[way](client, bad), WAIT)
    assert Counter.calls == 0  # nothing was sent
    assert await asyncio.wait_for(CALLS[way](client, math.inf), WAIT)
    assert Counter.calls == 1
