"""Sync code calling into an asyncio loop: the one portal of the project.

:class:`LoopThread` runs a loop in a daemon thread. :class:`Portal` lets any
other thread run a coroutine on a loop and block until it ends, lets another
loop await work that must run on it, and wakes every caller still waiting when
its loop goes away, so none waits forever. The bus uses one for its loop (the
sync client's path for every call), and long-lived async clients used from sync
code (the OpenAI client) use one on a loop thread of their own
(:meth:`Portal.on_thread`).

Blocking calls wait on a C ``SimpleQueue`` fed by the task's done callback:
cheaper than the ``Condition`` behind ``run_coroutine_threadsafe``'s future.

A coroutine handed to the loop runs in a copy of its caller's context
(:mod:`contextvars`), as it would have on the caller's own loop: what the
calling thread knows about the message it handles (its trace, its call depth:
:mod:`a2a_bus.runtime.tracing`, and OpenTelemetry's current span) goes with it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from a2a_bus.runtime.loops import new_event_loop

T = TypeVar("T")


class BusStopped(RuntimeError):
    """The bus is not running (its loop is gone, or was never there)."""

    def __init__(self, message: str = "the bus is not running") -> None:
        super().__init__(message)


#: What a blocking call made on the loop it would wait for raises.
BLOCKING_ON_LOOP = "blocking call on the bus loop: use the async client (await ...)"


class LoopThread:
    """A new event loop (see :mod:`a2a_bus.runtime.loops`) running in a daemon thread."""

    def __init__(
        self,
        name: str,
        new_loop: Callable[[], asyncio.AbstractEventLoop] = new_event_loop,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        """``on_end`` is called in the thread once its loop has ended, whether it was
        stopped, stopped itself or failed: callers waiting on it must not wait forever."""
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._new_loop = new_loop
        self._on_end = on_end

    @property
    def ident(self) -> int | None:
        """The id of the thread running the loop (``threading.get_ident``), once started."""
        return None if self._thread is None else self._thread.ident

    def start(self) -> asyncio.AbstractEventLoop:
        """Start the thread; its loop, once it runs."""
        ready = threading.Event()
        loop = self._new_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
                loop.close()
            finally:
                if self._on_end is not None:
                    self._on_end()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        ready.wait()
        self.loop = loop
        return loop

    def stop(self) -> None:
        """Stop the loop (what is scheduled on it is dropped) and join the thread."""
        thread, loop = self._thread, self.loop
        self._thread = self.loop = None
        if thread is not None and loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)


class Portal:
    """Calls into one event loop from other threads and other loops.

    ``attach`` the loop once it runs, ``detach`` it when it stops: calls then
    raise :class:`~a2a_bus.core.errors.BusStopped` (``stopped`` says why).
    """

    def __init__(self, stopped: str = "the bus is not running") -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The thread running the loop, when known (see :meth:`attach`).
        self._thread: int | None = None
        self._stopped = stopped
        #: What blocking calls wait on; each gets None when the loop goes away.
        self._waiting: set[queue.SimpleQueue[Any]] = set()
        #: The loop thread of :meth:`on_thread` portals, started on first use.
        self._own: LoopThread | None = None
        self._own_name: str | None = None
        self._lock = threading.Lock()

    @classmethod
    def on_thread(cls, name: str) -> Portal:
        """A portal to a loop thread of its own, started on first use (see :meth:`close`).

        Its loop is asyncio's own, not the bus's choice: the library clients served
        this way (the OpenAI client's httpx, the MCP SDK's sessions) are made for it,
        and under uvloop the SDK never sees a stdio server's process end.
        """
        portal = cls(f"{name}: closed")
        portal._own_name = name
        return portal

    # -- the loop -------------------------------------------------------------------

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Calls go to ``loop`` from now on. Attached from the loop itself, the portal
        also knows its thread: :meth:`on_loop` then tells it is on the loop without
        asking asyncio (whose ``get_running_loop`` makes a system call, getpid)."""
        self._loop = loop
        self._thread = threading.get_ident() if _running_loop() is loop else None

    def detach(self) -> None:
        """The loop is gone: later calls raise BusStopped, waiting ones are woken."""
        self._loop = None
        self._thread = None
        for waiting in list(self._waiting):
            waiting.put(None)

    @property
    def attached(self) -> asyncio.AbstractEventLoop | None:
        """The loop, or None (no error): for callers that only want to know."""
        return self._loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            if self._own_name is None:
                raise BusStopped(self._stopped)
            return self._start_own()
        return loop

    def on_loop_thread(self) -> bool:
        """True when the calling thread runs the loop (a blocking wait would hang it)."""
        loop = self._loop
        if loop is None:
            return False
        if self._thread is not None:
            return self._thread == threading.get_ident() and loop.is_running()
        return _running_loop() is loop

    def call_soon(self, callback: Callable[..., object], *args: Any) -> None:
        """Schedule ``callback`` on the loop from any thread (nothing if it is gone)."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                loop.call_soon_threadsafe(callback, *args)

    # -- calls ----------------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` as a task on the loop, from another thread, and return its
        result (or raise). BusStopped if the loop is gone or goes away meanwhile;
        RuntimeError (at once) when called on the loop itself."""
        try:
            loop = self.loop
        except BusStopped:
            coro.close()  # never started: no "never awaited" warning on top
            raise
        if self.on_loop_thread():
            coro.close()
            raise RuntimeError(BLOCKING_ON_LOOP)
        ended: queue.SimpleQueue[asyncio.Task[T] | None] = queue.SimpleQueue()
        started: list[asyncio.Task[T]] = []

        def begin() -> None:
            task = loop.create_task(coro)
            started.append(task)
            task.add_done_callback(ended.put)

        self._waiting.add(ended)
        try:
            # The task copies the context current when begin runs: the caller's.
            loop.call_soon_threadsafe(begin, context=contextvars.copy_context())
            task = ended.get()
        except RuntimeError:  # the loop closed meanwhile
            task = None
        except BaseException:  # interrupted (KeyboardInterrupt): stop the work too
            # Runs after begin (callbacks run in order), so the task exists then.
            loop.call_soon_threadsafe(lambda: started[0].cancel())
            raise
        finally:
            self._waiting.discard(ended)
        if task is None:
            if not started:
                coro.close()
            raise BusStopped(f"{self._stopped} before the call ended")
        return task.result()

    def on_loop(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """``coro`` to await from the loop itself or from any other loop.

        On the loop it is ``coro`` itself (no wrapping coroutine: this sits on
        every request's path).
        """
        try:
            loop = self.loop
        except BusStopped:
            coro.close()
            raise
        thread = self._thread
        if thread is not None:
            # Awaited in a coroutine: running in the loop's thread, it runs on that loop.
            if thread == threading.get_ident() and loop.is_running():
                return coro
        elif asyncio.get_running_loop() is loop:
            return coro
        try:
            future = _submit(coro, loop)
        except RuntimeError:  # the loop closed without a stop (no detach)
            coro.close()
            raise BusStopped(self._stopped) from None
        # Cancelling the await cancels the work on the loop (wrap_future passes it on).
        return asyncio.wrap_future(future)

    def iterate(self, start: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
        """Iterate the async iterator made by ``start`` (on the loop) from another thread."""
        return drive_iterator(lambda step: self.run(_await(step)), start)

    # -- a loop thread of its own -------------------------------------------------------

    def _start_own(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._own = LoopThread(self._own_name or "portal", asyncio.new_event_loop)
                self._loop = self._own.start()
                self._thread = self._own.ident
            return self._loop

    def close(self) -> None:
        """Stop the loop thread of an :meth:`on_thread` portal (a later call starts a
        new one)."""
        with self._lock:
            own, self._own = self._own, None
            loop, self._loop = self._loop, None
            self._thread = None
        if own is not None and loop is not None:
            for waiting in list(self._waiting):
                waiting.put(None)
            own.stop()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _await(start: Callable[[], Awaitable[T]]) -> T:
    return await start()


def _submit(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> Future[T]:
    """``asyncio.run_coroutine_threadsafe``, with the task in the caller's context."""
    future: Future[T] = concurrent.futures.Future()

    def begin() -> None:
        if future.cancelled():
            coro.close()
            return
        task = loop.create_task(coro)  # copies the context begin runs in: the caller's

        def settle(done: asyncio.Task[T]) -> None:
            if done.cancelled():
                future.cancel()
            elif future.set_running_or_notify_cancel():
                error = done.exception()
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(done.result())

        def cancel(ended: Future[T]) -> None:
            if ended.cancelled():
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(task.cancel)

        task.add_done_callback(settle)
        future.add_done_callback(cancel)

    loop.call_soon_threadsafe(begin, context=contextvars.copy_context())
    return future


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
