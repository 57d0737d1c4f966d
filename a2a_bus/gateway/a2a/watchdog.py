"""The inactivity watchdog of a gateway's tasks.

A task whose agent says nothing (no start, progress, chunk or answer) for longer
than the task's inactivity limit fails: the watchdog writes a ``failed`` record
to the task log. Every replica runs one, so several may write it; the fold keeps
the first. A write that fails is tried again at the next round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from a2a_bus.gateway.a2a.fold import TaskFold
from a2a_bus.protocol import ErrorCode

#: Writes a ``failed`` record for a task with this error; False when it could not.
Fail = Callable[[str, dict[str, Any]], Awaitable[bool]]


class Watchdog:
    """Fails the tasks of ``tasks()`` whose agent stayed silent past their limit."""

    def __init__(
        self, tasks: Callable[[], Iterable[TaskFold]], fail: Fail, clock: Callable[[], float]
    ) -> None:
        self._tasks = tasks
        self._fail = fail
        self._clock = clock
        #: Tasks failed by this watchdog whose record has not been folded yet.
        self._expiring: set[str] = set()

    async def run(self, every: float) -> None:
        """Look every ``every`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(every)
            await self._check()

    async def _check(self) -> None:
        now = self._clock()
        for fold in list(self._tasks()):
            task_id = fold.task.id
            if not fold.active:
                self._expiring.discard(task_id)
                continue
            if now - fold.last_activity <= fold.inactivity or task_id in self._expiring:
                continue
            self._expiring.add(task_id)
            error = {
                "code": int(ErrorCode.TIMEOUT),
                "message": "Timeout",
                "data": f"the agent {fold.agent!r} sent nothing for this task for over "
                f"{fold.inactivity:g} s (its inactivity limit)",
            }
            if not await self._fail(task_id, error):
                self._expiring.discard(task_id)  # the next round tries again
