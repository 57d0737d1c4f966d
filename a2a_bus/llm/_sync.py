"""Sync entry points over the async core.

``run_sync``/``iterate_sync`` use one private event loop per thread: agents on
the bus run in actor threads, and each such thread gets a long-lived loop so a
sync ``run()`` costs no event-loop setup per call. Clients that keep connections
across threads use a :class:`~a2a_bus.runtime.portal.Portal` on a loop thread instead.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

from a2a_bus.runtime.portal import drive_iterator

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
        # Closed when the thread object goes away, so ended threads leave no open sockets.
        weakref.finalize(threading.current_thread(), _close_idle, loop)
    return loop


def _close_idle(loop: asyncio.AbstractEventLoop) -> None:
    # At exit, a thread may still be in a run (a stop that gave up on its handler):
    # its loop cannot be closed then, and goes with the process.
    if not loop.is_running():
        loop.close()


def idle_thread_loop() -> asyncio.AbstractEventLoop | None:
    """This thread's private loop, when it has one and no loop is running here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
        return loop if loop is not None and not loop.is_closed() else None
    return None


def close_thread_loop() -> None:
    """Close this thread's private loop (call it before a long-lived thread ends)."""
    loop = idle_thread_loop()
    if loop is not None:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    _local.loop = None


async def _await(start: Callable[[], Awaitable[T]]) -> T:
    return await start()


def run_sync(what: str, start: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine made by ``start`` on this thread's private loop."""
    return _loop(what).run_until_complete(_await(start))


def iterate_sync(what: str, start: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Iterate the async iterator made by ``start`` from sync code."""
    loop = _loop(what)
    return drive_iterator(lambda step: loop.run_until_complete(_await(step)), start)
