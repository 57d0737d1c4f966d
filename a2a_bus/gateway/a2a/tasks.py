"""A small bounded in-memory store of recent A2A tasks, so ``GetTask`` works.

The store is shared by every caller, so each owner (token) is also bounded: an
owner's new task makes room among that owner's own tasks, never among others'.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from a2a_bus.gateway.a2a.errors import too_many_tasks
from a2a_bus.gateway.a2a.model import Task
from a2a_bus.gateway.settings import DEFAULT_MAX_TASKS


@dataclass
class TaskRecord:
    task: Task
    #: The endpoint's agent (None for the gateway's own endpoint).
    agent_id: str | None
    #: The identity of the token that created it: other tokens do not see it.
    owner: str
    #: The asyncio task running it, while it runs.
    runner: asyncio.Task[None] | None = None


class TaskStore:
    """Task id -> record, at most ``max_tasks`` of them and at most
    ``max_tasks_per_owner`` of one owner's (None: only the store's bound)."""

    def __init__(
        self, max_tasks: int = DEFAULT_MAX_TASKS, max_tasks_per_owner: int | None = None
    ) -> None:
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        if max_tasks_per_owner is not None and max_tasks_per_owner < 1:
            raise ValueError("max_tasks_per_owner must be at least 1 (or None)")
        self.max_tasks = max_tasks
        self.max_tasks_per_owner = max_tasks_per_owner
        self._records: OrderedDict[str, TaskRecord] = OrderedDict()
        #: Each owner's task ids, oldest first.
        self._owned: dict[str, OrderedDict[str, None]] = {}

    def __len__(self) -> int:
        return len(self._records)

    def owned(self, owner: str) -> int:
        """How many tasks of ``owner`` the store holds."""
        return len(self._owned.get(owner, ()))

    def add(self, record: TaskRecord) -> None:
        """Store a new task. An owner at its bound forgets its own oldest finished
        task; with none finished the new one is refused (an A2A error, HTTP 429).
        A full store forgets its oldest finished task, else its oldest."""
        owner = record.owner
        owned = self._owned.get(owner)
        bound = self.max_tasks_per_owner
        if owned is not None and bound is not None and len(owned) >= bound:
            finished = self._oldest_finished(owned)
            if finished is None:
                raise too_many_tasks(bound)
            self._drop(finished)
        self._records[record.task.id] = record
        self._owned.setdefault(owner, OrderedDict())[record.task.id] = None
        while len(self._records) > self.max_tasks:
            # A running task that is dropped still finishes; it is only not found later.
            finished = self._oldest_finished(self._records)
            self._drop(finished if finished is not None else next(iter(self._records)))

    def find(self, task_id: str, agent_id: str | None, owner: str) -> TaskRecord | None:
        """The record, if it belongs to this endpoint and caller."""
        record = self._records.get(task_id)
        if record is None or record.agent_id != agent_id or record.owner != owner:
            return None
        return record

    def _oldest_finished(self, task_ids: Iterable[str]) -> str | None:
        records = self._records
        return next((i for i in task_ids if records[i].task.state.terminal), None)

    def _drop(self, task_id: str) -> None:
        owner = self._records.pop(task_id).owner
        owned = self._owned[owner]
        del owned[task_id]
        if not owned:
            del self._owned[owner]
