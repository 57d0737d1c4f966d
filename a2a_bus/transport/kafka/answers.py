"""Answers waiting for the transaction that commits the records they answer.

exactly_once mode (:mod:`a2a_bus.transport.kafka.transactions`): each durable
member keeps an :class:`Outbox`; :class:`AnswerRoutes` tells the transport which
outbox of this process takes the answer to a consumed record (the one of the
member that owns the record's partition).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from aiokafka import TopicPartition

log = logging.getLogger(__name__)

#: Marks of dropped answers kept at most (:meth:`AnswerRoutes.dropped`). A mark
#: matters only while the record may come back here with its de-duplication key
#: still remembered; a mark this old is long past that.
MAX_DROPPED_MARKS = 100_000


class Answer(NamedTuple):
    """A record to produce once the consumed record at ``offset`` is committed."""

    offset: int
    topic: str
    value: bytes | None
    key: bytes | None
    headers: list[tuple[str, bytes]]


class Outbox:
    """Answers of one member waiting for their records' commit, per partition."""

    def __init__(self) -> None:
        self._answers: dict[TopicPartition, list[Answer]] = {}

    def add(self, tp: TopicPartition, answer: Answer) -> None:
        self._answers.setdefault(tp, []).append(answer)

    def take(self, positions: Mapping[TopicPartition, int]) -> list[Answer]:
        """Remove and return the answers to records below each partition's position."""
        taken: list[Answer] = []
        for tp, position in positions.items():
            waiting = self._answers.get(tp)
            if not waiting:
                continue
            kept = [a for a in waiting if a.offset >= position]
            taken.extend(a for a in waiting if a.offset < position)
            if kept:
                self._answers[tp] = kept
            else:
                del self._answers[tp]
        return taken

    def give_back(self, tp: TopicPartition, answers: Iterable[Answer]) -> None:
        """Put back answers of a transaction that failed, for the next one."""
        self._answers[tp] = [*answers, *self._answers.get(tp, [])]

    def drop(self, partitions: Iterable[TopicPartition]) -> list[tuple[TopicPartition, int]]:
        """Forget the answers of partitions handed over (their records were not
        committed here: the next owner answers them); the partition and offset
        of each record whose answer was dropped."""
        return [(tp, a.offset) for tp in partitions for a in self._answers.pop(tp, ())]


class AnswerRoutes:
    """Which outbox of this process takes the answer to a record of a partition."""

    def __init__(self, max_dropped: int = MAX_DROPPED_MARKS) -> None:
        #: None: a transactional member owned the partition and handed it over.
        self._outboxes: dict[TopicPartition, Outbox | None] = {}
        #: Records whose answer was dropped, oldest first (a dict keeps the order).
        self._dropped: dict[tuple[str, int, int], None] = {}
        self._max_dropped = max_dropped

    def claim(self, partitions: Iterable[TopicPartition], outbox: Outbox) -> None:
        for tp in partitions:
            self._outboxes[tp] = outbox

    def release(self, partitions: Iterable[TopicPartition], outbox: Outbox) -> None:
        for tp in partitions:
            if self._outboxes.get(tp) is outbox:
                self._outboxes[tp] = None

    def route(self, tp: TopicPartition) -> Outbox | bool | None:
        """The outbox of ``tp``'s owner; None if it was handed over (its records
        not committed here are the next owner's to answer); False if no
        transactional member of this process ever owned it."""
        return self._outboxes.get(tp, False)

    def dropped(self, topic: str, partition: int, offset: int) -> None:
        """The answer to this record was dropped (its partition was handed over
        while its handler ran, or before the answer was committed): whoever
        fetches it again, this process included, must handle it again."""
        marks = self._dropped
        marks[topic, partition, offset] = None
        if len(marks) > self._max_dropped:
            # The partition never came back here (or came back from further on):
            # without a bound these would pile up over a long life of rebalances.
            del marks[next(iter(marks))]
            log.debug("forgot the oldest mark of a dropped answer (%d kept)", len(marks))

    def reading_from(self, starts: Mapping[TopicPartition, int]) -> None:
        """These partitions are read here again from these offsets: the records
        below are not fetched here again, so their marks are forgotten."""
        stale = [
            mark
            for mark in self._dropped
            if mark[2] < starts.get(TopicPartition(mark[0], mark[1]), -1)
        ]
        for mark in stale:
            del self._dropped[mark]

    @property
    def dropped_marks(self) -> int:
        """Records marked as dropped now."""
        return len(self._dropped)

    def was_dropped(self, topic: str, partition: int, offset: int) -> bool:
        """Whether the answer to this record was dropped (until :meth:`settled`)."""
        return (topic, partition, offset) in self._dropped

    def settled(self, topic: str, partition: int, offset: int) -> None:
        """The handling of this record ended: forget that its answer was dropped."""
        self._dropped.pop((topic, partition, offset), None)
