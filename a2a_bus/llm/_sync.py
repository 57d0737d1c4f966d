"""Sync entry points over the async core: one private event loop per thread.

Agents on the bus run in actor threads; each such thread gets a long-lived
event loop so a sync ``run()`` costs no event-loop setup per call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()


def _loop(what: str) -> asyncio.AbstractEventLoop:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            f"{what} is the sync API and cannot run inside an event loop; use its async twin"
        )
    # A bare loop rather than asyncio.Runner: on the main thread Runner.run swaps the
    # SIGINT handler on every call, which costs a repr of the whole task each time.
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _local.loop = loop
    return loop


def run_sync(what: str, start: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine made by ``start`` on this thread's private loop."""
    loop = _loop(what)

    async def main() -> T:
        return await start()

    return loop.run_until_complete(main())


def iterate_sync(what: str, start: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Iterate the async iterator made by ``start`` from sync code."""
    loop = _loop(what)
    iterator = start()

    async def step() -> Any:
        return await iterator.__anext__()

    try:
        while True:
            try:
                item = loop.run_until_complete(step())
            except StopAsyncIteration:
                return
            yield item
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:

            async def finish() -> None:
                await close()

            loop.run_until_complete(finish())
