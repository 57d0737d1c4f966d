"""The correlator alone: deadlines on one timer, answers at most once, late replies counted."""

from __future__ import annotations

import asyncio

from a2a_bus.correlation import Correlator
from a2a_bus.metrics import Metrics

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
