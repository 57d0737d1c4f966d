"""run_eagerly: the first step at once, the rest from future callbacks, cancellable;
Started: the rest of a coroutine whose first step ran already."""

from __future__ import annotations

import asyncio

from a2a_bus.transport.eager import Started, run_eagerly


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


async def test_started_waits_for_the_first_wait_then_runs_the_rest() -> None:
    loop = asyncio.get_running_loop()
    first: asyncio.Future[int] = loop.create_future()
    second: asyncio.Future[int] = loop.create_future()
    seen: list[str] = []

    async def handler() -> str:
        seen.append(f"first {await first}")
        await asyncio.sleep(0)  # a bare yield passes through too
        seen.append(f"second {await second}")
        return "done"

    coro = handler()
    waiting = coro.send(None)
    assert waiting is first
    task = asyncio.ensure_future(_awaited(Started(coro, waiting)))
    await asyncio.sleep(0)
    assert seen == []  # still waiting for the first future
    first.set_result(1)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert seen == ["first 1"]
    second.set_result(2)
    assert await task == "done"
    assert seen == ["first 1", "second 2"]


async def test_started_passes_a_cancellation_into_the_coroutine() -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    cleaned: list[str] = []

    async def handler() -> None:
        try:
            await asyncio.sleep(0)
            await gate
        except asyncio.CancelledError:
            cleaned.append("cancelled")
            raise

    coro = handler()
    waiting = coro.send(None)
    assert waiting is None  # the bare yield of sleep(0)
    ended: list[BaseException | None] = []
    run = run_eagerly(_awaited(Started(coro, waiting)), ended.append, loop)
    run.cancel()  # between steps: thrown in at the next one
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert cleaned == ["cancelled"]
    assert len(ended) == 1 and isinstance(ended[0], asyncio.CancelledError)
    assert not gate.done()


async def test_started_raises_what_the_coroutine_raises() -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()

    async def handler() -> None:
        await gate
        raise KeyError("boom")

    coro = handler()
    rest = Started(coro, coro.send(None))
    gate.set_result(None)
    try:
        await rest
    except KeyError as exc:
        assert exc.args == ("boom",)
    else:
        raise AssertionError("the coroutine's error was not raised")


async def _awaited(rest: Started) -> object:
    return await rest
