"""An asyncio loop on a thread of its own, and blocking calls into a loop from
other threads: what lets sync code use the bus.

:class:`LoopThread` starts and stops the thread. :class:`SyncBridge` runs a
coroutine on a loop from another thread and blocks until it ends; it waits on
a C ``SimpleQueue`` fed by the task's done callback (cheaper than the
``Condition`` behind ``run_coroutine_threadsafe``'s future, and this is the
sync client's path for every call), and :meth:`SyncBridge.abandon` wakes every
caller still waiting when their loop goes away, so none waits forever.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from a2a_bus.core.errors import BusStopped
from a2a_bus.runtime.loops import new_event_loop

T = TypeVar("T")


class LoopThread:
    """A new event loop (see :mod:`a2a_bus.runtime.loops`) running in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> asyncio.AbstractEventLoop:
        """Start the thread; its loop, once it runs."""
        ready = threading.Event()
        loop = new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()
            loop.close()

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


class SyncBridge:
    """Blocking calls into a loop from other threads."""

    def __init__(self) -> None:
        #: What calls wait on; each gets None when :meth:`abandon` is called.
        self._waiting: set[queue.SimpleQueue[Any]] = set()

    def call(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` as a task on ``loop`` and return its result (or raise).

        Raises BusStopped if the loop closed, or went away before the task ended.
        """
        ended: queue.SimpleQueue[asyncio.Task[T] | None] = queue.SimpleQueue()
        started: list[asyncio.Task[T]] = []

        def begin() -> None:
            task = loop.create_task(coro)
            started.append(task)
            task.add_done_callback(ended.put)

        self._waiting.add(ended)
        try:
            loop.call_soon_threadsafe(begin)
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
            raise BusStopped("the bus stopped before the call ended")
        return task.result()

    def abandon(self) -> None:
        """Wake every call still waiting (their loop is gone): they raise BusStopped."""
        for waiting in list(self._waiting):
            waiting.put(None)
