"""Run a coroutine's first step now and its other steps from future callbacks.

What ``asyncio.eager_task_factory`` does from Python 3.12, for one coroutine
and without a Task: a delivery handler usually hands its work to an actor and
then waits for one future, so starting it at once saves a task and a loop
iteration per record. The coroutine must await only asyncio futures (or
tasks), or yield bare (``asyncio.sleep(0)``); it cannot be cancelled from
outside, and ``asyncio.current_task()`` is the caller's task in its first step
and None after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

Done = Callable[[BaseException | None], None]


class _Eager:
    __slots__ = ("_coro", "_done", "_loop")

    def __init__(
        self, coro: Coroutine[Any, Any, Any], done: Done, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._coro = coro
        self._done = done
        self._loop = loop

    def step(self, _: object = None) -> None:
        try:
            awaited = self._coro.send(None)
        except StopIteration:
            self._done(None)
            return
        except BaseException as exc:  # reported, as a task would keep it
            self._done(exc)
            return
        if getattr(awaited, "_asyncio_future_blocking", False):
            awaited._asyncio_future_blocking = False
            awaited.add_done_callback(self.step)
        elif awaited is None:
            self._loop.call_soon(self.step)
        else:
            self._coro.close()
            self._done(RuntimeError(f"eagerly run coroutine yielded {awaited!r}"))


def run_eagerly(
    coro: Coroutine[Any, Any, Any], done: Done, loop: asyncio.AbstractEventLoop
) -> None:
    """Run ``coro`` up to its first wait now; ``done(None)`` or ``done(exception)`` at its end."""
    _Eager(coro, done, loop).step()
