"""The updates of each task a gateway keeps for its subscribers.

A fold numbers a task's updates (the same on every replica); the view keeps the
last :data:`KEPT_UPDATES` of each task here, so a subscriber follows them as they
come and one that resumes (``Last-Event-ID``) gets exactly those after the one it
saw. Calls waiting for a task's next change (a blocking send, a cancel) wait here
too.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable

from a2a_bus.gateway.a2a.fold import TaskFold
from a2a_bus.gateway.a2a.model import Task
from a2a_bus.gateway.a2a.updates import StatusChanged, Versioned

#: Updates kept per task for a subscriber that resumes (older ones: the snapshot).
KEPT_UPDATES = 1024


class KeptUpdates:
    """The kept updates of the tasks ``get`` finds, and who waits for them."""

    def __init__(self, get: Callable[[str], TaskFold | None]) -> None:
        self._get = get
        self._updates: dict[str, deque[Versioned]] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    def add(self, task_id: str, updates: list[Versioned]) -> None:
        """Keep a task's new updates (none: the task is new)."""
        self._updates.setdefault(task_id, deque(maxlen=KEPT_UPDATES)).extend(updates)

    def drop(self, task_id: str) -> None:
        """Forget a task's updates (the view forgot the task)."""
        self._updates.pop(task_id, None)

    def wake(self, task_id: str) -> None:
        """The task changed: whoever waits for it looks again."""
        for waiter in self._waiters.get(task_id, ()):
            if not waiter.done():
                waiter.set_result(None)

    def after(self, task_id: str, version: int) -> list[Versioned] | None:
        """The kept updates after ``version``; None when some were no longer kept."""
        kept = self._updates.get(task_id, deque())
        fold = self._get(task_id)
        # A restored task's updates before its snapshot are kept nowhere.
        newest = kept[-1].version if kept else fold.version if fold is not None else 0
        if version >= newest:
            return []
        if not kept or kept[0].version > version + 1:
            return None
        return [update for update in kept if update.version > version]

    def task_at(self, task_id: str, version: int) -> Task | None:
        """The task as it was at ``version`` (0: as submitted), when that is a
        status change still kept; else None."""
        fold = self._get(task_id)
        if fold is None:
            return None
        if version == 0:
            task = fold.task
            return Task(task.context_id, task.history[:1], id=task.id)
        for kept in self._updates.get(task_id, ()):
            if kept.version == version and isinstance(kept.update, StatusChanged):
                return kept.update.snapshot
        return None

    async def changed(self, task_id: str) -> None:
        """Wait for the next change of ``task_id`` (or its first record)."""
        future = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(task_id, []).append(future)
        try:
            await future
        finally:
            waiters = self._waiters.get(task_id)
            if waiters is not None and future in waiters:
                waiters.remove(future)
                if not waiters:
                    del self._waiters[task_id]

    async def follow(self, task_id: str, after: int) -> AsyncIterator[Versioned]:
        """The updates of ``task_id`` after version ``after``, as they come; ends
        after the one that makes it terminal or input-required (a stream of the task
        ends there). Raises LookupError when updates after ``after`` are no longer
        kept."""
        while True:
            updates = self.after(task_id, after)
            if updates is None:
                raise LookupError(f"updates of task {task_id} after {after} are no longer kept")
            for update in updates:
                yield update
                after = update.version
            fold = self._get(task_id)
            if fold is not None and not updates and not fold.active and after >= fold.version:
                return
            if not updates:
                await self.changed(task_id)
