"""A small bounded in-memory store of recent A2A tasks, so ``GetTask`` works."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from a2a_bus.gateway.a2a.model import Task

#: How many tasks the store remembers; the oldest are forgotten first.
DEFAULT_MAX_TASKS = 1000


@dataclass
class TaskRecord:
    task: Task
    #: The endpoint's agent (None for the gateway's own endpoint).
    agent_id: str | None
    #: The name of the token that created it: other tokens do not see it.
    owner: str
    #: The asyncio task running it, while it runs.
    runner: asyncio.Task[None] | None = None


class TaskStore:
    """Task id -> record, at most ``max_tasks`` of them (least recently added dropped)."""

    def __init__(self, max_tasks: int = DEFAULT_MAX_TASKS) -> None:
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        self.max_tasks = max_tasks
        self._records: OrderedDict[str, TaskRecord] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def add(self, record: TaskRecord) -> None:
        self._records[record.task.id] = record
        while len(self._records) > self.max_tasks:
            # A running task that is dropped still finishes; it is only not found later.
            self._records.popitem(last=False)

    def find(self, task_id: str, agent_id: str | None, owner: str) -> TaskRecord | None:
        """The record, if it belongs to this endpoint and caller."""
        record = self._records.get(task_id)
        if record is None or record.agent_id != agent_id or record.owner != owner:
            return None
        return record
