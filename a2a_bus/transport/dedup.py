"""A bounded window of recently seen event keys, for de-duplicating redeliveries."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable


class DedupWindow:
    """Remembers the last ``capacity`` keys and the completion of their handling.

    ``claim(key)`` returns None for a new key (the caller handles it and later
    calls ``done(key)``), or a future for a key already claimed: the duplicate
    must wait for it before it is acknowledged, so the original's offset is
    never committed over while the original is still running.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        self._capacity = capacity
        # A future is made only when a copy arrives while the original runs;
        # RUNNING and DONE stand in for it otherwise (the common case).
        self._entries: dict[Hashable, asyncio.Future[None] | bool] = {}
        # Keys oldest first: a plain dict and a deque cost less per event than an
        # OrderedDict (~360 against ~520 ns a claim and its done).
        self._order: deque[Hashable] = deque()
        #: Keys forgotten while still in the order, and how often: their places there
        #: are spent (a key claimed again keeps its new place).
        self._spent: dict[Hashable, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def claim(self, key: Hashable) -> asyncio.Future[None] | None:
        """None if ``key`` is new (now claimed), else the original's completion."""
        if self._capacity == 0:
            return None
        entries = self._entries
        existing = entries.get(key)
        if existing is None:
            entries[key] = _RUNNING
            order = self._order
            order.append(key)
            if len(order) > self._capacity:
                self._evict(order.popleft())
            return None
        if isinstance(existing, asyncio.Future):
            return existing
        future = asyncio.get_running_loop().create_future()
        if existing is _DONE:
            future.set_result(None)
        else:
            entries[key] = future
        return future

    def done(self, key: Hashable) -> None:
        """Mark the handling of ``key`` finished (successfully or not)."""
        entries = self._entries
        entry = entries.get(key)
        if entry is not None:
            entries[key] = _DONE
            if entry is not _RUNNING:
                _release(entry)

    def forget(self, key: Hashable) -> None:
        """Drop ``key`` so that a later copy is handled again (e.g. not handled)."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._spent[key] = self._spent.get(key, 0) + 1
            _release(entry)

    def _evict(self, key: Hashable) -> None:
        spent = self._spent
        if spent and key in spent:  # forgotten since: this place is not the key's now
            left = spent.pop(key) - 1
            if left:
                spent[key] = left
            return
        oldest = self._entries.pop(key, _DONE)
        if oldest is not _DONE:
            _release(oldest)


_RUNNING = True
_DONE = False


def _release(entry: asyncio.Future[None] | bool | None) -> None:
    if isinstance(entry, asyncio.Future) and not entry.done():
        entry.set_result(None)
