"""Subscribes and stops of inboxes waiting for the inbox consumer to follow.

:class:`~a2a_bus.transport.kafka.inboxes.KafkaInboxes` replaces its member until
its topics are the wanted ones; each subscribe or stop waits here until a
member's topics include its inbox (or no longer do), or learns why not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from a2a_bus.transport.kafka.target import Target


class _Change:
    """A subscribe (``present``) or stop waiting for the composition to follow."""

    __slots__ = ("done", "present", "target")

    def __init__(self, target: Target, present: bool, done: asyncio.Future[None]) -> None:
        self.target = target
        self.present = present
        self.done = done


class Changes:
    """The changes of one inbox consumer not settled yet."""

    def __init__(self) -> None:
        self._pending: list[_Change] = []

    def __bool__(self) -> bool:
        return bool(self._pending)

    def add(self, target: Target, *, present: bool) -> asyncio.Future[None]:
        """Wait for ``target``'s topic to be in the composition (``present``) or out
        of it: the future is done then, or fails with why not."""
        change = _Change(target, present, asyncio.get_running_loop().create_future())
        self._pending.append(change)
        return change.done

    def settle(self, composition: frozenset[str]) -> None:
        """Resolve the changes ``composition`` satisfies."""
        pending = []
        for change in self._pending:
            if change.done.done():
                continue
            assert change.target.topic is not None
            if (change.target.topic in composition) == change.present:
                change.done.set_result(None)
            else:
                pending.append(change)
        self._pending = pending

    def refuse(self, conflicts: Mapping[str, BaseException]) -> list[Target]:
        """Fail the subscribes of ``conflicts``' topics, each with its own error;
        their targets (no longer to be added)."""
        refused, pending = [], []
        for change in self._pending:
            topic = change.target.topic
            assert topic is not None
            if change.present and topic in conflicts and not change.done.done():
                refused.append(change.target)
                change.done.set_exception(conflicts[topic])
            else:
                pending.append(change)
        self._pending = pending
        return refused

    def fail(self, error: BaseException) -> list[Target]:
        """Fail every change; the targets of the subscribes among them (not added)."""
        changes, self._pending = self._pending, []
        for change in changes:
            if not change.done.done():
                change.done.set_exception(error)
        return [change.target for change in changes if change.present]
