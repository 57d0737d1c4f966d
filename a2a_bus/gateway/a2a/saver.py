"""Saving a view's changed tasks to its task store, in batches, in the background.

The view tells the saver which tasks changed and which it forgot; the saver
saves their snapshots (as they are when saved: a task that changed ten times
since is saved once) at most every ``pause`` seconds, deletes the forgotten ones,
and saves what is left when it stops. A store that fails is tried again a few
times; then those changes are dropped (the store keeps an earlier state of the
tasks, their next change saves them).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Container

from a2a_bus.gateway.a2a.stores import Snapshot, TaskStore
from a2a_bus.runtime.loops import stop_task

log = logging.getLogger(__name__)

#: Seconds before saving again after a store failed, and how many tries a change gets.
RETRY, TRIES = 2.0, 5


class Saver:
    def __init__(
        self,
        store: TaskStore,
        snapshot: Callable[[str], Snapshot | None],
        held: Container[str],
        *,
        pause: float,
    ) -> None:
        self.store = store
        self._snapshot = snapshot
        #: The tasks the view holds (a forgotten one is not saved, a held one not deleted).
        self._held = held
        self._pause = pause
        #: Changed tasks, with the snapshot to save when one was given.
        self._changed: dict[str, Snapshot | None] = {}
        self._gone: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def changed(self, task_id: str, snapshot: Snapshot | None = None) -> None:
        """Save ``task_id``: as ``snapshot`` says, else as the view has it then."""
        self._changed[task_id] = snapshot
        self._wake.set()

    def forgotten(self, task_id: str) -> None:
        self._changed.pop(task_id, None)
        self._gone.add(task_id)
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Save what is left (once more if that fails)."""
        task, self._task = self._task, None
        await stop_task(task)
        try:
            await self.save()
        except Exception as exc:
            log.warning("task view: its last changes were not saved: %s", exc)

    async def _run(self) -> None:
        failed = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.save()
            except Exception as exc:
                failed += 1
                if failed < TRIES:
                    log.warning("task view: saving to the task store failed: %s", exc)
                    await asyncio.sleep(RETRY)
                    self._wake.set()
                    continue
                log.error("task view: changes of %d tasks not saved: %s", len(self._changed), exc)
                self._changed.clear()
                self._gone.clear()
            failed = 0
            await asyncio.sleep(self._pause)

    async def save(self) -> None:
        """Save the changes so far (those that fail stay for the next try)."""
        gone, self._gone = self._gone, set()
        changed, self._changed = self._changed, {}
        try:
            if gone:
                await self.store.delete(gone)
            snapshots = [
                given if given is not None else self._snapshot(task_id)
                for task_id, given in changed.items()
            ]
            saved = [snapshot for snapshot in snapshots if snapshot is not None]
            if saved:
                await self.store.save_many(saved)
        except BaseException:  # kept for the next try (saving twice is harmless)
            held = self._held
            self._gone |= {task_id for task_id in gone if task_id not in held}
            for task_id, given in changed.items():
                if task_id in held:
                    self._changed.setdefault(task_id, given)
            raise
