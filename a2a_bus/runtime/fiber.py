"""A call that can give its actor back while it waits, and continue later.

A handler reading a caller's stream would otherwise hold its actor's thread
for as long as the caller takes to send, and every message queued behind it
(including, through the transport's bounds, the stream's own next chunks)
would wait. A :class:`Fiber` runs such a call on a thread of its own, but only
while the actor's thread waits for it: the two hand one turn back and forth,
so agent code never runs on two threads at once. When the call must wait for
input it ``park``s: the actor goes on with its other messages, and resumes
the fiber (``run_slice``) once the input is there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_current = threading.local()


class FiberAborted(BaseException):
    """Raised inside a parked fiber whose actor stopped: the call unwinds.

    A BaseException, so that a handler's ``except Exception`` does not keep it
    running on an agent instance that is gone.
    """


class Fiber:
    """Runs ``call()`` on its own thread, one slice at a time, for an actor."""

    def __init__(self, call: Callable[[], Any], name: str) -> None:
        self._call = call
        self._name = name
        self._turn = threading.Semaphore(0)  # the fiber may run
        self._back = threading.Semaphore(0)  # the actor may run
        self._thread: threading.Thread | None = None
        self._aborted = False
        self.finished = False
        self.result: Any = None
        self.error: BaseException | None = None
        #: Called (from any thread) when a parked fiber may go on; set by the actor.
        self.wake: Callable[[], None] = lambda: None

    @staticmethod
    def current() -> Fiber | None:
        """The fiber running on this thread, or None."""
        fiber: Fiber | None = getattr(_current, "fiber", None)
        return fiber

    def run_slice(self) -> bool:
        """Run the call until it parks or ends (in the actor's thread); True once ended."""
        if self.finished:
            return True
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
            self._thread.start()
        else:
            self._turn.release()
        self._back.acquire()
        return self.finished

    def park(self) -> None:
        """Give the turn back to the actor until ``run_slice`` (in the fiber's thread)."""
        if self._aborted:
            raise FiberAborted
        self._back.release()
        self._turn.acquire()
        if self._aborted:
            raise FiberAborted

    def abort(self, timeout: float = 10.0) -> None:
        """Unwind a parked call (its ``finally`` blocks run) and wait for it to end."""
        if self.finished or self._thread is None:
            return
        self._aborted = True
        self._turn.release()
        self._back.acquire(timeout=timeout)

    def _main(self) -> None:
        _current.fiber = self
        try:
            self.result = self._call()
        except FiberAborted:
            pass
        except BaseException as exc:  # handed to the actor's thread, which raises it
            self.error = exc
        finally:
            self.finished = True
            self._back.release()


__all__ = ["Fiber", "FiberAborted"]
