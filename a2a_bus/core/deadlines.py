"""Many deadlines on one loop timer.

A timer per pending request would cost a timer handle, and its cancel, on every
request's path. :class:`Deadlines` keeps a heap of ``(when, key)`` entries and one
timer, for the earliest. An entry is not removed when its wait ends early (an
answer came): the owner says which entries are still current, the others are
dropped as they surface, or all at once when they are over half the heap.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Callable

#: A deadline this close is due (loop timers fire within the clock's resolution).
DUE_SLACK = 0.001


class Deadlines:
    """The deadlines of an owner's waits, each known by its key (a request id).

    ``tracked(key)`` is when the key's current entry is due (None once its wait
    ended): an entry due at another time is stale. ``due(key, now)`` is called for
    a current entry whose time came: the owner ends the wait if it is over, or
    says when it is due now (it moved on since it was tracked; ``math.inf``: no
    entry until the owner tracks it again).
    """

    def __init__(
        self,
        tracked: Callable[[str], float | None],
        due: Callable[[str, float], float],
    ) -> None:
        self._tracked = tracked
        self._due = due
        self._heap: list[tuple[float, str]] = []
        self._compact_at = 1024
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def track(self, key: str, when: float, loop: asyncio.AbstractEventLoop) -> None:
        """Call ``due`` for ``key`` at loop time ``when``, if the entry is still current then."""
        heap = self._heap
        heapq.heappush(heap, (when, key))
        if when < self._timer_at:
            self._arm(loop, when)
        elif len(heap) > self._compact_at:
            tracked = self._tracked
            self._heap = heap = [entry for entry in heap if tracked(entry[1]) == entry[0]]
            heapq.heapify(heap)
            self._compact_at = 2 * len(heap) + 1024

    def clear(self) -> None:
        """Forget every entry; the timer is cancelled."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at, self._heap = None, math.inf, []
        self._compact_at = 1024

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._sweep, loop)
        self._timer_at = when

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand what is due to ``due``, following the deadlines that moved on;
        re-arm for the earliest entry still current."""
        self._timer, self._timer_at = None, math.inf
        now = loop.time() + DUE_SLACK
        heap, tracked = self._heap, self._tracked
        while heap and (heap[0][0] <= now or tracked(heap[0][1]) != heap[0][0]):
            when, key = heapq.heappop(heap)
            if when > now or tracked(key) != when:
                continue
            later = self._due(key, now)
            if later != math.inf:
                heapq.heappush(heap, (later, key))
        if heap:
            self._arm(loop, heap[0][0])
