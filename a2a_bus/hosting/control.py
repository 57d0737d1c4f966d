"""What a handler can do beyond returning while it runs: see whether its caller
canceled the request, and report progress on long work.

The host gives each request a :class:`RunControl`; the handler reaches it as
``self.cancelled`` and ``self.progress(...)`` (see :class:`~a2a_bus.hosting.agent.Agent`).
Progress is carried only for a request run as a task (an A2A task): there it is a
``working`` status update and resets the task's inactivity deadline. Elsewhere it
costs nothing and goes nowhere.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class RunControl:
    """The cancel flag and progress report of one request being handled."""

    __slots__ = ("_cancelled", "_report")

    def __init__(self, report: Callable[[Any], None] | None = None) -> None:
        self._cancelled = threading.Event()
        #: Called (from the handler's thread) with each progress note.
        self._report = report

    @property
    def cancelled(self) -> bool:
        """True once the caller canceled the request."""
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """The caller canceled: a handler that looks stops (a generator is closed
        at its next item by the host)."""
        self._cancelled.set()

    def progress(self, note: Any = None) -> None:
        """Report progress (``note``: a string or any JSON value, or None)."""
        if self._report is not None:
            self._report(note)


class _Idle(RunControl):
    """The control of a handler run outside a task: nothing cancels it this way
    (a stream's cancel closes the generator itself)."""

    __slots__ = ()

    def cancel(self) -> None:
        pass


#: Shared by every handler run outside a task.
IDLE: RunControl = _Idle()
