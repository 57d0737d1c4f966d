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

from a2a_bus import Agent, Bus, method
from tests.call_counts import count_calls

#: Calls of a2a_bus functions per request: 58 when the budget was set, down from 74.
CALLS_PER_REQUEST = 66
REQUESTS = 300


class Calc(Agent):
    agent_id = "cost-calc"

    @method
    def subtract(self, minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend


async def _requests(bus: Bus, count: int) -> None:
    client = bus.async_client()
    for i in range(count):
        assert await client.request("cost-calc", "subtract", [i, 1]) == i - 1


def test_an_in_memory_request_stays_within_its_budget_of_calls() -> None:
    calls = count_calls(Calc, _requests, 100, REQUESTS)
    per_request = sum(calls.project.values()) / REQUESTS
    top = ", ".join(f"{name} {count / REQUESTS:g}" for name, count in calls.project.most_common(8))
    # The count saw every request on the loop and in the actor's thread.
    assert calls.project["_event"] == calls.project["on_receive"] == REQUESTS
    assert per_request <= CALLS_PER_REQUEST, f"{per_request:.1f} calls per request: {top}"
