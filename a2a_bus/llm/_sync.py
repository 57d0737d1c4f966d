"""Sync entry points over the async core.

``run_sync``/``iterate_sync`` use one private event loop per thread: agents on
the bus run in actor threads, and each such thread gets a long-lived loop so a
sync ``run()`` costs no event-loop setup per call. A :class:`Portal` is one loop
thread shared by every caller, for clients that keep connections.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
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
        # Closed when the thread object goes away, so ended threads leave no open sockets.
        weakref.finalize(threading.current_thread(), loop.close)
    return loop


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


def drive_iterator(
    run: Callable[[Callable[[], Awaitable[Any]]], Any], start: Callable[[], AsyncIterator[T]]
) -> Iterator[T]:
    """Iterate an async iterator from sync code; ``run`` waits for one awaitable."""
    iterator = start()
    try:
        while True:
            try:
                item = run(iterator.__anext__)
            except StopAsyncIteration:
                return
            yield item
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            run(close)


class Portal:
    """An event loop in a daemon thread, started on first use, that any thread can hand
    coroutines to and wait for (also from inside another running loop).

    A client whose sync methods run its async ones here keeps one connection pool for
    all threads, and can close it from any thread.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def call(self, start: Callable[[], Awaitable[T]]) -> T:
        """Run the coroutine made by ``start`` on the portal's loop and wait for it."""
        loop = self._started()
        if threading.current_thread() is self._thread:
            raise RuntimeError(f"{self.name}: a blocking call from the portal's own loop")

        return asyncio.run_coroutine_threadsafe(_await(start), loop).result()

    async def acall(self, start: Callable[[], Awaitable[T]]) -> T:
        """Await the coroutine made by ``start`` on the portal's loop from another loop;
        cancelling the await cancels it there."""
        loop = self._started()
        if asyncio.get_running_loop() is loop:
            return await start()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_await(start), loop))

    def iterate(self, start: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
        """Iterate the async iterator made by ``start`` on the portal's loop."""
        return drive_iterator(self.call, start)

    def close(self) -> None:
        """Stop the loop thread (a later call starts a new one)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
