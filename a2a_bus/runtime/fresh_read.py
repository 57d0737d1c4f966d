"""One read shared by the callers that need a fresh one.

A caller that must see at least what was true when it asked (a log's end, to
read the log up to it) cannot take the answer of a read already in flight: that
read may have left before the caller's own question. It can take the answer of
the next read, and so can every caller that comes while the current one is in
flight. So at most two reads run back to back however many callers wait, and
each caller's answer comes from a read sent after it asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from a2a_bus.runtime.loops import stop_task

T = TypeVar("T")


class FreshRead(Generic[T]):
    """``await fresh()``: the result of a call of ``read`` made after this await began."""

    def __init__(self, read: Callable[[], Awaitable[T]]) -> None:
        self._read = read
        #: The read in flight, if any.
        self._running: asyncio.Future[T] | None = None
        #: The read the callers that came during ``_running`` wait for.
        self._next: asyncio.Future[T] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: Reads made (for tests and metrics).
        self.reads = 0

    async def __call__(self) -> T:
        if self._running is None:
            future = self._running = asyncio.get_running_loop().create_future()
            self._start(future)
        else:
            if self._next is None:
                self._next = asyncio.get_running_loop().create_future()
            future = self._next
        # Shielded: a caller that gives up does not cancel the others' read.
        return await asyncio.shield(future)

    async def aclose(self) -> None:
        """Stop the reads in flight (their callers get CancelledError)."""
        waiting, self._next = self._next, None
        if waiting is not None:
            waiting.cancel()
        for task in list(self._tasks):
            await stop_task(task)

    def _start(self, future: asyncio.Future[T]) -> None:
        task = asyncio.get_running_loop().create_task(self._run(future))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, future: asyncio.Future[T]) -> None:
        self.reads += 1
        try:
            result = await self._read()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
                future.exception()  # retrieved here: every caller may have given up
        else:
            if not future.done():
                future.set_result(result)
        finally:
            self._running, waiting, self._next = self._next, self._next, None
            if waiting is not None:
                self._start(waiting)


__all__ = ["FreshRead"]
