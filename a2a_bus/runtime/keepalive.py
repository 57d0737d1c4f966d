"""One non-daemon thread that keeps the process alive while daemon threads work.

Every agent replica runs in a thread of its own. CPython before 3.13 scans
every live non-daemon thread whenever one starts (``threading`` drops the
shutdown locks of threads that ended), so starting n non-daemon threads costs
O(n^2): 10,000 agents took minutes to spawn. Actor threads are daemons
instead, and while any of them runs, one non-daemon keeper thread does what
they did as non-daemons: the interpreter does not exit under a running agent
(it waits for the keeper, as it waited for them).
"""

from __future__ import annotations

import threading


class KeepAlive:
    """Counts the threads that must not be cut short; a non-daemon thread lives
    while the count is above zero."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._count = 0
        self._keeper: threading.Thread | None = None

    @property
    def count(self) -> int:
        return self._count

    def enter(self) -> None:
        """One more thread to wait for (call before starting it)."""
        with self._lock:
            self._count += 1
            if self._keeper is None:
                self._keeper = threading.Thread(target=self._hold, name=self.name, daemon=False)
                self._keeper.start()

    def leave(self) -> None:
        """A thread counted by :meth:`enter` ends (or never started)."""
        with self._lock:
            self._count -= 1
            if self._count == 0:
                self._idle.notify_all()

    def _hold(self) -> None:
        with self._lock:
            while self._count:
                self._idle.wait()
            # Under the lock: an enter() from now on starts a new keeper.
            self._keeper = None


#: The keeper of the agents' actor threads.
ACTORS = KeepAlive("a2a-bus-actors-alive")
