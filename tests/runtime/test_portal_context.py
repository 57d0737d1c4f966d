"""The portal runs a caller's coroutine in a copy of the caller's context."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator

import pytest

from a2a_bus.runtime.portal import LoopThread, Portal

where: contextvars.ContextVar[str | None] = contextvars.ContextVar("where", default=None)


@pytest.fixture
def portal() -> Iterator[Portal]:
    thread = LoopThread("portal-context")
    portal = Portal()
    portal.attach(thread.start())
    yield portal
    thread.stop()
    portal.detach()


async def _where() -> str | None:
    return where.get()


def test_a_blocking_call_sees_the_calling_threads_context(portal: Portal) -> None:
    token = where.set("actor thread")
    try:
        assert portal.run(_where()) == "actor thread"
    finally:
        where.reset(token)
    assert portal.run(_where()) is None


def test_a_call_from_another_loop_sees_that_tasks_context(portal: Portal) -> None:
    async def caller() -> str | None:
        where.set("other loop")
        return await portal.on_loop(_where())

    assert asyncio.run(caller()) == "other loop"


def test_cancelling_the_await_from_another_loop_cancels_the_work(portal: Portal) -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def work() -> None:
        portal.loop.call_soon(lambda: None)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def caller() -> None:
        task = asyncio.ensure_future(portal.on_loop(work()))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(caller())
    portal.run(asyncio.sleep(0.05))
    assert cancelled == [True]
    assert not started.is_set()


def test_an_error_on_the_loop_reaches_the_other_loop(portal: Portal) -> None:
    async def fail() -> None:
        raise ValueError("on the loop")

    async def caller() -> None:
        with pytest.raises(ValueError, match="on the loop"):
            await portal.on_loop(fail())

    asyncio.run(caller())
