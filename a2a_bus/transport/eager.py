"""Run a coroutine's first step now and its other steps from future callbacks.

What ``asyncio.eager_task_factory`` does from Python 3.12, for one coroutine
and without a Task: a delivery handler usually hands its work to an actor and
then waits for one future, so starting it at once saves a task and a loop
iteration per record. Both transports drive their handlers this way.

The coroutine must await only asyncio futures (or tasks), or yield bare
(``asyncio.sleep(0)``); ``asyncio.current_task()`` is the caller's task in its
first step and None after, so ``asyncio.timeout`` cannot be used inside it
(``asyncio.wait_for`` can). :meth:`EagerRun.cancel` cancels it the way
``Task.cancel`` cancels a task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from typing import Any

Done = Callable[[BaseException | None], None]


class EagerRun:
    """Drives one coroutine; subclasses say what happens at its end (:meth:`finished`)."""

    __slots__ = ("_cancelling", "_coro", "_loop", "_waiting")

    def __init__(self, coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop) -> None:
        self._coro = coro
        self._loop = loop
        self._waiting: asyncio.Future[Any] | None = None
        self._cancelling = False

    def finished(self, error: BaseException | None) -> None:
        """Called once, when the coroutine returned (None) or raised."""
        raise NotImplementedError

    def step(self, _: object = None) -> None:
        """Run the coroutine up to its next wait (the first step, or a future's callback)."""
        self._waiting = None
        try:
            if self._cancelling:
                self._cancelling = False
                awaited = self._coro.throw(asyncio.CancelledError())
            else:
                awaited = self._coro.send(None)
        except StopIteration:
            self.finished(None)
            return
        except BaseException as exc:  # reported, as a task would keep it
            self.finished(exc)
            return
        if getattr(awaited, "_asyncio_future_blocking", False):
            awaited._asyncio_future_blocking = False
            self._waiting = awaited
            awaited.add_done_callback(self.step)
        elif awaited is None:  # a bare yield
            self._loop.call_soon(self.step)
        else:
            self._coro.close()
            self.finished(RuntimeError(f"eagerly run coroutine yielded {awaited!r}"))

    def cancel(self) -> None:
        """Raise CancelledError in the coroutine at its current wait (or its next step)."""
        waiting = self._waiting
        if waiting is not None and waiting.cancel():
            return  # its callback resumes the coroutine with CancelledError
        self._cancelling = True


class _WithCallback(EagerRun):
    __slots__ = ("_done",)

    def __init__(
        self, coro: Coroutine[Any, Any, Any], done: Done, loop: asyncio.AbstractEventLoop
    ) -> None:
        super().__init__(coro, loop)
        self._done = done

    def finished(self, error: BaseException | None) -> None:
        self._done(error)


def run_eagerly(
    coro: Coroutine[Any, Any, Any], done: Done, loop: asyncio.AbstractEventLoop
) -> EagerRun:
    """Run ``coro`` up to its first wait now; ``done(None)`` or ``done(exception)`` at its end."""
    run = _WithCallback(coro, done, loop)
    run.step()
    return run


class Started:
    """The rest of a coroutine whose first step ran already and yielded ``first``.

    Awaiting it waits for ``first`` as the coroutine would have, then runs the
    coroutine to its end, passing its waits (and a cancellation) through. For code
    that runs a coroutine's first step itself to see whether it finishes at once.
    """

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, None, Any]:
        coro, awaited = self._coro, self._first
        while True:
            try:
                yield awaited
            except BaseException as exc:  # thrown in at this wait: the coroutine's to handle
                try:
                    awaited = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
                continue
            try:
                awaited = coro.send(None)
            except StopIteration as stop:
                return stop.value
