"""Sync entry points over the async core: one private event loop per thread.

Agents on the bus run in actor threads; each such thread gets a long-lived
``asyncio.Runner`` so a sync ``run()`` costs no event-loop setup per call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()


def _runner(what: str) -> asyncio.Runner:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            f"{what} is the sync API and cannot run inside an event loop; use its async twin"
        )
    runner: asyncio.Runner | None = getattr(_local, "runner", None)
    if runner is None:
        runner = asyncio.Runner()
        _local.runner = runner
    return runner


def run_sync(what: str, start: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine made by ``start`` on this thread's private loop."""
    runner = _runner(what)

    async def main() -> T:
        return await start()

    return runner.run(main())


def iterate_sync(what: str, start: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Iterate the async iterator made by ``start`` from sync code."""
    runner = _runner(what)
    iterator = start()

    async def step() -> Any:
        return await iterator.__anext__()

    try:
        while True:
            try:
                item = runner.run(step())
            except StopAsyncIteration:
                return
            yield item
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:

            async def finish() -> None:
                await close()

            runner.run(finish())
