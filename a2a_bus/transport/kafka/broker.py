"""The Kafka transport as its consuming parts see it, and its counters.

Group members, targets and the inboxes take the transport as a :class:`Broker`
(what they use of it), so they need not import the transport module that
builds them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from aiokafka import TopicPartition

from a2a_bus.protocol import Adaptor
from a2a_bus.transport.base import MAX_TOPIC_CHARS, DeadLetter
from a2a_bus.transport.kafka.answers import AnswerRoutes
from a2a_bus.transport.kafka.config import KafkaSettings

_TOPIC_NAME = re.compile(rf"^[A-Za-z0-9._-]{{1,{MAX_TOPIC_CHARS}}}$")


def check_topic_name(topic: str) -> None:
    """Raise ValueError unless ``topic`` is a name Kafka accepts."""
    if not _TOPIC_NAME.match(topic):
        raise ValueError(
            f"invalid Kafka topic name {topic[:60]!r} ({len(topic)} characters): "
            f"use 1 to {MAX_TOPIC_CHARS} of [A-Za-z0-9._-]"
        )


@dataclass
class KafkaMetrics:
    """Counters of one transport (all subscriptions together)."""

    #: Records written (publish, publish_raw and dead letters).
    produced: int = 0
    delivered: int = 0
    redelivered: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    handler_errors: int = 0
    commits: int = 0
    #: Fetches of the transport's group members that returned records, and the
    #: records they held: under load, records per fetch tells how many requests
    #: travel together between the broker and this process.
    fetches: int = 0
    fetched: int = 0
    topics_created: int = 0
    #: CreateTopics requests sent (the topics of concurrent callers share one).
    create_requests: int = 0


class Broker(Protocol):
    """What consumers of the transport use: settings, counters, topics, groups,
    dead letters (``KafkaTransport`` is one)."""

    settings: KafkaSettings
    adaptor: Adaptor
    metrics: KafkaMetrics
    #: exactly_once: the outbox of each partition a member of this process owns.
    answer_routes: AnswerRoutes

    @property
    def ready(self) -> bool: ...

    async def ensure_topics(self, topics: Sequence[str], partitions: int | None = None) -> None: ...

    def created(self, topic: str) -> bool:
        """Whether this transport created ``topic`` (so it began empty, at offset 0)."""

    def known(self, topic: str) -> bool:
        """Whether this transport has seen that ``topic`` exists (created or found)."""

    async def list_topics(self) -> list[str]: ...

    async def partitions(self, topics: Sequence[str]) -> list[TopicPartition]: ...

    async def consumer_groups(self) -> list[str]: ...

    async def group_topics(self, groups: Sequence[str]) -> dict[str, set[str]]: ...

    async def committed_offsets(
        self, group: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[int, str]]: ...

    def acks_at_once(self) -> AbstractContextManager[None]:
        """While inside, acknowledgements are not held for the next hand-over."""

    async def dead_letter(self, letter: DeadLetter) -> None: ...
