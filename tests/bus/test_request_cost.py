"""What one in-memory request costs, counted rather than timed.

A request's latency on the in-memory bus is the thread hand-off floor plus the
bus's Python work on the loop and in the actor (``a2a-bus bench memory`` times
it). The work is counted here with ``sys.setprofile``: calls of the project's
own functions per request (a coroutine's resumptions count as calls too), in
every thread, which does not depend on the machine's speed or load. The
budget leaves some room; a change that adds steps to every request's path
(another layer, a helper per message) fails it, and should either be worth it
(raise the budget, say why) or be done off that path.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import a2a_bus
from a2a_bus import Agent, Bus, method

#: Calls of a2a_bus functions per request: 58 when the budget was set, down from 74.
CALLS_PER_REQUEST = 66
REQUESTS = 300
_PACKAGE = str(Path(a2a_bus.__file__).parent)


class Calc(Agent):
    agent_id = "cost-calc"

    @method
    def subtract(self, minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend


class _Calls:
    """Counts calls of a2a_bus functions, in every thread, while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.by_name: Counter[str] = Counter()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.on and event == "call" and frame.f_code.co_filename.startswith(_PACKAGE):
            self.by_name[frame.f_code.co_name] += 1


async def _requests(bus: Bus, count: int) -> None:
    client = bus.async_client()
    for i in range(count):
        assert await client.request("cost-calc", "subtract", [i, 1]) == i - 1


def test_an_in_memory_request_stays_within_its_budget_of_calls() -> None:
    calls = _Calls()
    threading.setprofile(calls)  # the bus's loop and actor threads start after this
    try:
        # No heartbeat during the count: only requests run.
        with Bus.memory(heartbeat=3600) as bus:
            bus.spawn(Calc)
            asyncio.run_coroutine_threadsafe(_requests(bus, 100), bus.loop).result()  # warm
            calls.on = True
            asyncio.run_coroutine_threadsafe(_requests(bus, REQUESTS), bus.loop).result()
            calls.on = False
    finally:
        threading.setprofile(None)
    per_request = sum(calls.by_name.values()) / REQUESTS
    top = ", ".join(f"{name} {count / REQUESTS:g}" for name, count in calls.by_name.most_common(8))
    # The count saw every request on the loop and in the actor's thread.
    assert calls.by_name["_event"] == calls.by_name["on_receive"] == REQUESTS
    assert per_request <= CALLS_PER_REQUEST, f"{per_request:.1f} calls per request: {top}"
