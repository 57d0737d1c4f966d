"""Many deadlines on one loop timer: due ones handed to their owner in time order,
stale ones skipped, moved ones followed, thousands of ended ones dropped."""

from __future__ import annotations

import asyncio
import math

from a2a_bus.core.deadlines import Deadlines

WAIT = 30.0


class Owner:
    """Waits by key, each with its deadline; ``due`` ends a wait whose time came."""

    def __init__(self) -> None:
        self.deadline: dict[str, float] = {}
        self.tracked: dict[str, float] = {}
        self.ended: list[str] = []
        self.all_ended = asyncio.Event()
        self.deadlines = Deadlines(self.tracked.get, self.due)

    def wait(self, key: str, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        when = self.deadline[key] = self.tracked[key] = loop.time() + seconds
        self.deadlines.track(key, when, loop)

    def settle(self, key: str) -> None:
        del self.deadline[key], self.tracked[key]

    def due(self, key: str, now: float) -> float:
        if self.deadline[key] <= now:
            self.settle(key)
            self.ended.append(key)
            if not self.deadline:
                self.all_ended.set()
            return math.inf
        self.tracked[key] = self.deadline[key]
        return self.deadline[key]


async def test_due_waits_end_in_the_order_of_their_deadlines() -> None:
    owner = Owner()
    owner.wait("late", 0.06)
    owner.wait("early", 0.02)  # tracked after, due first: the timer moves to it
    owner.wait("middle", 0.04)
    await asyncio.wait_for(owner.all_ended.wait(), WAIT)
    assert owner.ended == ["early", "middle", "late"]


async def test_a_wait_settled_before_its_deadline_is_never_handed_over() -> None:
    owner = Owner()
    owner.wait("answered", 0.02)
    owner.wait("unanswered", 0.04)
    owner.settle("answered")
    await asyncio.wait_for(owner.all_ended.wait(), WAIT)
    assert owner.ended == ["unanswered"]


async def test_a_deadline_moved_later_is_followed_from_its_first_entry() -> None:
    owner = Owner()
    owner.wait("stream", 0.02)
    owner.deadline["stream"] += 0.05  # a chunk came: due later, no new entry
    owner.wait("other", 0.04)
    await asyncio.wait_for(owner.all_ended.wait(), WAIT)
    assert owner.ended == ["other", "stream"]


async def test_thousands_of_settled_waits_are_dropped_and_the_live_one_still_ends() -> None:
    owner = Owner()
    owner.wait("first", WAIT)  # arms the timer far out: the rest only push entries
    for n in range(5000):
        owner.wait(f"r{n}", WAIT)
        owner.settle(f"r{n}")
    owner.settle("first")
    owner.wait("live", 0.02)
    await asyncio.wait_for(owner.all_ended.wait(), WAIT)
    assert owner.ended == ["live"]


async def test_cleared_deadlines_end_nothing() -> None:
    owner = Owner()
    owner.wait("a", 0.01)
    owner.deadlines.clear()
    await asyncio.sleep(0.05)
    assert owner.ended == []
    owner.settle("a")
    owner.wait("b", 0.01)  # still usable after a clear
    await asyncio.wait_for(owner.all_ended.wait(), WAIT)
    assert owner.ended == ["b"]
