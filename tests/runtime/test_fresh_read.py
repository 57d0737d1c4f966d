"""A fresh read: each caller gets the answer of a read sent after it asked, and the
callers that come while one read is in flight share the next one."""

from __future__ import annotations

import asyncio

import pytest

from a2a_bus.runtime.fresh_read import FreshRead


class Log:
    """A log whose end moves; a read answers with the end as it was when the read
    was sent, once let through."""

    def __init__(self) -> None:
        self.end = 0
        self.sent: list[asyncio.Event] = []
        self.fail: Exception | None = None

    async def read_end(self) -> int:
        seen, gate = self.end, asyncio.Event()
        self.sent.append(gate)
        await gate.wait()
        if self.fail is not None:
            raise self.fail
        return seen

    async def until_sent(self, count: int) -> None:
        """Wait until ``count`` reads were sent."""
        while len(self.sent) < count:
            await asyncio.sleep(0)

    async def let_through(self, count: int) -> None:
        """Wait until ``count`` reads were sent, then let the last one answer."""
        await self.until_sent(count)
        self.sent[count - 1].set()


async def test_a_caller_that_comes_during_a_read_gets_the_next_one() -> None:
    log = Log()
    fresh = FreshRead(log.read_end)
    first = asyncio.ensure_future(fresh())
    await log.until_sent(1)  # the log's end is 0 in it
    log.end = 1  # written after that read left
    second = asyncio.ensure_future(fresh())
    await log.let_through(1)
    assert await first == 0
    await log.let_through(2)
    assert await second == 1  # not the answer of the read already in flight
    assert fresh.reads == 2


async def test_callers_that_come_during_one_read_share_the_next() -> None:
    log = Log()
    fresh = FreshRead(log.read_end)
    first = asyncio.ensure_future(fresh())
    await log.until_sent(1)
    waiting = [asyncio.ensure_future(fresh()) for _ in range(10)]
    log.end = 7
    await log.let_through(1)
    await log.let_through(2)
    assert await first == 0
    assert await asyncio.gather(*waiting) == [7] * 10
    assert fresh.reads == 2
    log.end = 9
    later = asyncio.ensure_future(fresh())
    await log.let_through(3)
    assert await later == 9  # nothing in flight: a read of its own


async def test_a_failed_read_fails_its_callers_and_the_next_call_reads_again() -> None:
    log = Log()
    fresh = FreshRead(log.read_end)
    log.fail = ConnectionError("broker away")
    failing = asyncio.ensure_future(fresh())
    await log.let_through(1)
    with pytest.raises(ConnectionError, match="broker away"):
        await failing
    log.fail = None
    again = asyncio.ensure_future(fresh())
    await log.let_through(2)
    assert await again == 0
    assert fresh.reads == 2


async def test_a_caller_that_gives_up_leaves_the_shared_read_to_the_others() -> None:
    log = Log()
    fresh = FreshRead(log.read_end)
    first = asyncio.ensure_future(fresh())
    await log.until_sent(1)
    leaving, staying = asyncio.ensure_future(fresh()), asyncio.ensure_future(fresh())
    await asyncio.sleep(0)
    leaving.cancel()
    log.end = 3
    await log.let_through(1)
    await log.let_through(2)
    assert (await first, await staying) == (0, 3)
    assert leaving.cancelled()


async def test_closing_stops_the_reads_and_their_callers() -> None:
    log = Log()
    fresh = FreshRead(log.read_end)
    first = asyncio.ensure_future(fresh())
    await log.until_sent(1)
    second = asyncio.ensure_future(fresh())
    await asyncio.sleep(0)  # waiting for the next read
    await fresh.aclose()
    for caller in (first, second):
        with pytest.raises(asyncio.CancelledError):
            await caller
    assert fresh.reads == 1  # the waiting callers' read never left
