"""run_eagerly: the first step at once, the rest from future callbacks, cancellable."""

from __future__ import annotations

import asyncio

from a2a_bus.transport.eager import run_eagerly


async def test_first_step_runs_at_once_and_the_rest_after_the_future() -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[int] = loop.create_future()
    seen: list[str] = []
    ended: list[BaseException | None] = []

    async def handler() -> None:
        seen.append("started")
        seen.append(f"got {await gate}")

    run_eagerly(handler(), ended.append, loop)
    assert seen == ["started"]  # before any loop iteration
    gate.set_result(7)
    await asyncio.sleep(0)
    assert seen == ["started", "got 7"]
    assert ended == [None]


async def test_cancel_raises_in_the_coroutine_at_its_wait() -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    cleaned: list[bool] = []
    ended: list[BaseException | None] = []

    async def handler() -> None:
        try:
            await gate
        finally:
            cleaned.append(True)

    run = run_eagerly(handler(), ended.append, loop)
    run.cancel()
    await asyncio.sleep(0)
    assert gate.cancelled()
    assert cleaned == [True]
    assert len(ended) == 1 and isinstance(ended[0], asyncio.CancelledError)


async def test_an_exception_is_reported_to_done() -> None:
    loop = asyncio.get_running_loop()
    ended: list[BaseException | None] = []

    async def handler() -> None:
        await asyncio.sleep(0)
        raise KeyError("boom")

    run_eagerly(handler(), ended.append, loop)
    assert ended == []
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(ended) == 1 and isinstance(ended[0], KeyError)


async def test_yielding_something_else_is_an_error() -> None:
    loop = asyncio.get_running_loop()
    ended: list[BaseException | None] = []

    class Odd:
        def __await__(self):  # type: ignore[no-untyped-def]
            yield "not a future"

    async def handler() -> None:
        await Odd()

    run_eagerly(handler(), ended.append, loop)
    assert len(ended) == 1 and isinstance(ended[0], RuntimeError)
