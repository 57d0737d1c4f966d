"""Every A2A task of the bus as one gateway sees it, kept up to date from the task log.

Each gateway replica reads the whole task log (``<prefix>.tasks``, in a group of
its own that keeps no progress: it reads from the oldest retained record at each
start) and folds each task's records (:mod:`.fold`). So any replica answers
``GetTask``, ``ListTasks``, ``CancelTask`` and ``SubscribeToTask`` for any task,
and a restarted one finds the tasks the log retains.

The view also keeps the updates of each task (numbered by the fold, the same on
every replica) for subscribers, bounded per task (:mod:`.kept_updates`), and runs
the inactivity watchdog (:mod:`.watchdog`), which fails a task whose agent stays
silent by writing a ``failed`` record to the log.

With a task store (:mod:`.stores`) the view starts from the stored snapshots and
folds only the log records after each one's position, so a task outlives the
log's retention (or the in-memory log's process). A snapshot's position counts
only when the log reaches past it at start; a shorter log is another log (the
in-memory transport's after a restart) whose records all fold onto the snapshot.
A restored task that was submitted or working gets its whole inactivity limit
from the start: its agent answers, or the watchdog fails it. By default the view
saves the snapshots of the tasks it changed itself (a batch at most every
``save_pause`` seconds, the rest at stop) and deletes the tasks it forgets;
``saving=False`` leaves saving to someone else, who reads :meth:`TaskView.snapshot`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from a2a_bus.core.routing import Topics
from a2a_bus.gateway.a2a.fold import UNREADABLE, TaskFold
from a2a_bus.gateway.a2a.kept_updates import KeptUpdates
from a2a_bus.gateway.a2a.saver import Saver
from a2a_bus.gateway.a2a.stores import Snapshot, TaskStore
from a2a_bus.gateway.a2a.task_log import EntryKind, entry_event, read_entry
from a2a_bus.gateway.a2a.updates import Versioned
from a2a_bus.gateway.a2a.watchdog import Watchdog
from a2a_bus.runtime.fresh_read import FreshRead
from a2a_bus.runtime.loops import stop_task
from a2a_bus.transport.base import Delivery, Subscription, Transport

log = logging.getLogger(__name__)

#: Records whose updates are kept for the notifier (which is not far behind).
KEPT_RECORDS = 65536


class TaskView:
    """The tasks of the task log, folded, bounded: at most ``max_tasks_per_owner``
    of one owner's (a new one makes room by forgetting the owner's own oldest
    finished task; None: no such bound) and ``max_tasks`` in all (the oldest
    finished task is forgotten first, whoever's, else the oldest).

    ``store``: where the tasks' latest states are kept (:mod:`.stores`): loaded at
    start; with ``saving`` the view saves its changes there itself (a batch at most
    every ``save_pause`` seconds, the rest at stop) and deletes the tasks it
    forgets; without, whoever saves reads :meth:`snapshot`."""

    def __init__(
        self,
        transport: Transport,
        topics: Topics,
        node: str,
        source: str,
        *,
        max_bytes: int,
        max_tasks: int,
        max_tasks_per_owner: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        store: TaskStore | None = None,
        saving: bool = True,
        save_pause: float = 0.2,
    ) -> None:
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        if max_tasks_per_owner is not None and max_tasks_per_owner < 1:
            raise ValueError("max_tasks_per_owner must be at least 1 (or None)")
        self.max_tasks_per_owner = max_tasks_per_owner
        self._transport = transport
        self._topic = topics.tasks
        #: The log's end, read after the call that asks came (concurrent calls share one).
        self._log_end = FreshRead(lambda: transport.end_offsets(topics.tasks))
        self._group = f"{topics.prefix}.tasks.view.{node}"
        self._source = source
        self.max_bytes = max_bytes
        self.max_tasks = max_tasks
        self._clock = clock
        self._tasks: OrderedDict[str, TaskFold] = OrderedDict()
        #: Each owner's task ids, oldest first.
        self._owned: dict[str, OrderedDict[str, None]] = {}
        #: Each task's latest updates, for its subscribers and for calls awaiting a change.
        self.updates = KeptUpdates(self._tasks.get)
        #: Next offset to read per partition: what the view has folded.
        self._read: dict[int, int] = {}
        self._read_changed: asyncio.Event | None = None
        #: The updates each recent record made: (partition, offset) -> (task, updates).
        self._made: OrderedDict[tuple[int, int], tuple[str, list[Versioned]]] = OrderedDict()
        self._subscription: Subscription | None = None
        self._watchdog = Watchdog(self.tasks, self.write_failed, clock)
        self._watching: asyncio.Task[None] | None = None
        self.store = store
        #: Where the last record folded into each task is: (partition, offset).
        self._positions: dict[str, tuple[int, int]] = {}
        #: Restored tasks whose log records up to this position are in the snapshot.
        self._restored: dict[str, tuple[int, int]] = {}
        #: Saves the tasks the view forgets (deletes) and, with ``saving``, its changes;
        #: without, whoever calls :meth:`handled` says when a task may be saved.
        self._saver = (
            Saver(store, self.snapshot, self._tasks, pause=save_pause)
            if store is not None
            else None
        )
        self._saves_itself = saving

    # -- lifecycle --------------------------------------------------------------------

    async def start(self, *, watch_every: float = 1.0) -> None:
        self._read_changed = asyncio.Event()
        if self.store is not None:
            # The log's ends before reading it: a snapshot at or past them is of another log.
            ends = (await self._transport.read(self._topic, limit=1, newest=True)).position
            self._restore(await self.store.load(), ends)
        if self._saver is not None:
            self._saver.start()
        self._subscription = await self._transport.subscribe(
            [self._topic],
            self._group,
            self._on_record,
            from_beginning=True,
            durable=False,
            dead_letter=False,
            max_in_flight=1024,
        )
        self._watching = asyncio.get_running_loop().create_task(self._watchdog.run(watch_every))

    async def stop(self) -> None:
        watching, self._watching = self._watching, None
        await stop_task(watching)
        await self._log_end.aclose()
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            await subscription.stop()
        if self._saver is not None:
            await self._saver.stop()
        if self.store is not None:
            await self.store.close()

    # -- reading ----------------------------------------------------------------------

    def get(self, task_id: str) -> TaskFold | None:
        return self._tasks.get(task_id)

    def find(self, task_id: str, endpoint: str | None, owner: str) -> TaskFold | None:
        """The task, if it belongs to this endpoint and caller."""
        fold = self._tasks.get(task_id)
        if fold is None or fold.endpoint != endpoint or fold.owner != owner:
            return None
        return fold

    def tasks(self) -> Iterable[TaskFold]:
        return self._tasks.values()

    def owned(self, owner: str) -> list[TaskFold]:
        """The tasks of ``owner`` the view holds, oldest first."""
        tasks = self._tasks
        return [tasks[task_id] for task_id in self._owned.get(owner, ())]

    def unfinished(self, owner: str) -> int:
        """How many tasks of ``owner`` are not terminal."""
        return sum(1 for fold in self.owned(owner) if not fold.task.state.terminal)

    async def made_by(
        self, partition: int, offset: int, timeout: float = 30.0
    ) -> tuple[str, list[Versioned]] | None:
        """The task and the updates the log record at ``partition``/``offset`` made,
        once the view has folded it (None: it made none, or is no longer kept)."""
        await self._folded({partition: offset + 1}, timeout)
        return self._made.pop((partition, offset), None)

    async def sync(self, timeout: float = 5.0) -> None:
        """Wait until the view has folded every record written to the log before
        this call (a task another replica created a moment ago is then known).

        With the broker out of reach (or the log's end not known within ``timeout``)
        the view stays as it is: a call about a task is answered from what was read,
        rather than waiting for the broker or failing."""
        problem = self._transport.connection_problem
        if problem is not None:
            log.debug("task view not synced: %s", problem)
            return
        deadline = self._clock() + timeout
        try:
            async with asyncio.timeout(timeout):
                ends = await self._log_end()
        except Exception as exc:  # any failure to learn the end: answer from the view
            log.warning("task view not synced: the log's end is unknown (%r)", exc)
            return
        await self._folded(ends, max(0.0, deadline - self._clock()))

    async def _folded(self, ends: dict[int, int], timeout: float) -> None:
        """Wait until the view has read each partition up to its offset in ``ends``."""
        deadline = self._clock() + timeout
        assert self._read_changed is not None, "start the view first"
        while any(self._read.get(p, 0) < end for p, end in ends.items()):
            left = deadline - self._clock()
            if left <= 0:
                log.debug("task view sync gave up: read %s, log ends %s", self._read, ends)
                return
            self._read_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._read_changed.wait(), left)

    # -- folding ----------------------------------------------------------------------

    async def _on_record(self, delivery: Delivery) -> None:
        try:
            self._fold(delivery)
        finally:
            self._read[delivery.partition] = max(
                self._read.get(delivery.partition, 0), delivery.offset + 1
            )
            if self._read_changed is not None:
                self._read_changed.set()

    def _fold(self, delivery: Delivery) -> None:
        entry = read_entry(delivery.event)
        if entry is None:
            return
        now = self._clock()
        task_id = entry.task_id
        restored = self._restored.get(task_id)
        if restored is not None and restored[0] == delivery.partition:
            if delivery.offset <= restored[1]:
                return  # in the snapshot already
            del self._restored[task_id]
        fold = self._tasks.get(task_id)
        updates: list[Versioned] = []
        if fold is None:
            if entry.kind is not EntryKind.SUBMITTED:
                return  # a task this view forgot, or a record without its task
            try:
                fold = TaskFold(entry, self.max_bytes, now)
            except UNREADABLE as exc:
                log.warning("task %s: a submitted record that cannot be read: %s", task_id, exc)
                return
            self._add(fold)
        else:
            try:
                updates = fold.apply(entry, now)
            except UNREADABLE as exc:
                log.warning(
                    "task %s: a %s record that cannot be read: %s", task_id, entry.kind, exc
                )
                return
            self.updates.add(task_id, updates)
        made = self._made
        made[(delivery.partition, delivery.offset)] = (task_id, updates)
        if len(made) > KEPT_RECORDS:
            made.popitem(last=False)
        if task_id in self._tasks:
            self._positions[task_id] = (delivery.partition, delivery.offset)
            if self._saver is not None and self._saves_itself:
                self._saver.changed(task_id)
        self.updates.wake(task_id)

    def _add(self, fold: TaskFold) -> None:
        task_id = fold.task.id
        self._tasks[task_id] = fold
        self._owned.setdefault(fold.owner, OrderedDict())[task_id] = None
        self.updates.add(task_id, [])
        self._evict(fold.owner)

    def _evict(self, owner: str) -> None:
        """Make room after ``owner``'s new task: its own oldest finished task first."""
        bound, owned = self.max_tasks_per_owner, self._owned[owner]
        if bound is not None and len(owned) > bound:
            finished = self._oldest_finished(owned)
            if finished is not None:
                self._forget(finished)
        tasks = self._tasks
        while len(tasks) > self.max_tasks:
            # A running task that is forgotten still runs; it is only not found here.
            finished = self._oldest_finished(tasks)
            self._forget(finished if finished is not None else next(iter(tasks)))

    def _oldest_finished(self, task_ids: Iterable[str]) -> str | None:
        tasks = self._tasks
        return next((i for i in task_ids if tasks[i].task.state.terminal), None)

    def _forget(self, task_id: str) -> None:
        owner = self._tasks.pop(task_id).owner
        self.updates.drop(task_id)
        self._positions.pop(task_id, None)
        self._restored.pop(task_id, None)
        if self._saver is not None:
            self._saver.forgotten(task_id)
        owned = self._owned[owner]
        del owned[task_id]
        if not owned:
            del self._owned[owner]

    # -- the store --------------------------------------------------------------------

    def handled(self, task_id: str, partition: int, offset: int) -> None:
        """The record at ``partition``/``offset`` of ``task_id`` has had its effects
        (its push notifications delivered): the task may be saved as of that record,
        and no later (a snapshot past a record still being delivered would hide it
        from the next owner of its partition after a crash)."""
        if self._saver is None:
            return
        snapshot = self.snapshot(task_id, at=(partition, offset))
        if snapshot is not None:
            self._saver.changed(task_id, snapshot)

    def snapshot(self, task_id: str, at: tuple[int, int] | None = None) -> Snapshot | None:
        """The task as folded so far, with the position of its last record folded
        (None: the view does not hold it). ``at``: a (partition, offset) the snapshot
        must be of: None when the view has folded a later record of the task since,
        or not this one yet (a snapshot past a record whose effects are still being
        delivered would hide them from a successor that handles it again)."""
        fold = self._tasks.get(task_id)
        position = self._positions.get(task_id)
        if fold is None or position is None or (at is not None and at != position):
            return None
        return Snapshot(task_id, fold.record(), *position)

    def _restore(self, snapshots: list[Snapshot], ends: dict[int, int]) -> None:
        now = self._clock()
        for snapshot in snapshots:
            task_id = snapshot.task_id
            try:
                fold = TaskFold.from_record(snapshot.record, self.max_bytes, now)
            except UNREADABLE as exc:
                log.warning("task %s: a stored snapshot that cannot be read: %s", task_id, exc)
                continue
            if fold.task.id != task_id or task_id in self._tasks:
                log.warning("task %s: a stored snapshot of another task", task_id)
                continue
            self._add(fold)
            if task_id not in self._tasks:
                continue  # forgotten at once: the view is full
            position = (snapshot.partition, snapshot.offset)
            self._positions[task_id] = position
            if snapshot.offset < ends.get(snapshot.partition, 0):
                self._restored[task_id] = position
        if snapshots:
            log.info("task view: %d tasks restored from the store", len(self._tasks))

    # -- writing ----------------------------------------------------------------------

    async def write(self, kind: EntryKind, task_id: str, data: dict[str, Any]) -> None:
        """Write a gateway's record about ``task_id`` to the log."""
        event = entry_event(kind, task_id, data, source=self._source)
        await self._transport.publish(self._topic, event, key=task_id.encode())

    async def write_failed(self, task_id: str, error: dict[str, Any]) -> bool:
        """Write that ``task_id`` failed with ``error``; False (logged) when the
        write itself failed."""
        try:
            await self.write(EntryKind.FAILED, task_id, {"error": error})
        except Exception as exc:  # any failure to publish: the caller may try again
            log.warning("could not fail task %s: %s", task_id, exc)
            return False
        return True
