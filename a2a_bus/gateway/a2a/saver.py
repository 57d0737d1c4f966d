"""Saving a view's changed tasks to its task store, in batches, in the background.

The view tells the saver which tasks changed and which it forgot; the saver
saves their snapshots (as they are when saved: a task that changed ten times
since is saved once) at most every ``pause`` seconds, deletes the forgotten ones,
and saves what is left when it stops. A store that fails (a locked or full disk,
a broker out of reach) is tried again, less often the longer it fails, and the
changes wait for it: they are the latest state of tasks the view holds (bounded
like them), and a finished task changes no more, so a change dropped would never
be saved. A store that lost what it held (:class:`.stores.StoreLost`) gets every
task the view holds again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection

from a2a_bus.gateway.a2a.stores import Snapshot, StoreLost, TaskStore
from a2a_bus.runtime.loops import stop_task

log = logging.getLogger(__name__)

#: Seconds before saving again after a store failed; doubled per failure, up to the last.
RETRY, RETRY_MAX = 0.25, 30.0


class Saver:
    def __init__(
        self,
        store: TaskStore,
        snapshot: Callable[[str], Snapshot | None],
        held: Collection[str],
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

    @property
    def pending(self) -> int:
        """How many tasks' changes (and deletions) are not saved yet."""
        return len(self._changed) + len(self._gone)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Save what is left (once more if that fails)."""
        task, self._task = self._task, None
        await stop_task(task)
        try:
            await self._save_all()
        except Exception as exc:
            log.warning(
                "task view: the last changes of %d tasks were not saved: %s", self.pending, exc
            )

    async def _run(self) -> None:
        failed = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._save_all()
            except Exception as exc:
                failed += 1
                wait = min(RETRY * 2 ** min(failed - 1, 16), RETRY_MAX)
                log.warning(
                    "task view: the task store failed (%d times in a row; the changes of %d "
                    "tasks wait, next try in %g s): %s",
                    failed,
                    self.pending,
                    wait,
                    exc,
                )
                await asyncio.sleep(wait)
                self._wake.set()
                continue
            if failed:
                log.warning("task view: the task store saves again, after %d failures", failed)
                failed = 0
            await asyncio.sleep(self._pause)

    async def _save_all(self) -> None:
        """:meth:`save`, with every held task again when the store lost them."""
        try:
            await self.save()
        except StoreLost as exc:
            log.warning("task view: %s: saving its %d tasks again", exc, len(self._held))
            # As the view has them now: that may be past a record whose pushes are being
            # delivered (were the process to die then, they would not be sent again), a
            # smaller loss than every task's.
            for task_id in self._held:
                self._changed.setdefault(task_id, None)
            await self.save()

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
