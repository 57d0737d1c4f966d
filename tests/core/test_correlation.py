"""The correlator alone: deadlines on one timer, answers at most once, late replies counted."""

from __future__ import annotations

import asyncio

import pytest

from a2a_bus.core.correlation import Correlator
from a2a_bus.core.metrics import Metrics
from a2a_bus.protocol import JsonRpcError, new_event
from a2a_bus.transport.base import Delivery

WAIT = 30.0


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


def _chunk(request_id: str, seq: int, item: object, *, end: bool = False) -> Delivery:
    attributes = {
        "id": f"{request_id}-{seq}-{end}",
        "source": "test",
        "type": "test.response",
        "collaborationid": request_id,
        "seq": seq,
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
