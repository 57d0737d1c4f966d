"""The cluster's topics and groups, as the Kafka transport sees them.

Creating topics (the topics asked for in one loop iteration share one
CreateTopics request), whether a topic is known or was created here, the
partitions of topics, a group's committed offsets, and the topics each consumer
group subscribes to. The transport owns one :class:`ClusterAdmin` and answers
these questions through it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.protocol import ConsumerProtocol
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from a2a_bus.transport.kafka.broker import KafkaMetrics, check_topic_name
from a2a_bus.transport.kafka.config import KafkaSettings

log = logging.getLogger(__name__)

#: Looks at a group caught in a rebalance before its subscriptions are taken as unknown.
_DESCRIBE_ATTEMPTS = 25
_DESCRIBE_RETRY = 0.2


class ClusterAdmin:
    """Topics and groups through an admin client (``start()``/``close()``)."""

    def __init__(self, settings: KafkaSettings, metrics: KafkaMetrics) -> None:
        self._settings = settings
        self._metrics = metrics
        self._client: AIOKafkaAdminClient | None = None
        #: Topics known to exist (created here or found); read for every record produced.
        self.known_topics: set[str] = set()
        #: Topics this transport created (they began empty).
        self._created: set[str] = set()
        self._compacted: set[str] = set()
        self._private: set[str] = set()
        #: Per topic being created, its creation.
        self._creating: dict[str, asyncio.Future[None]] = {}
        #: Topics waiting for the next CreateTopics request, and the task sending it.
        self._queued: list[tuple[str, int]] = []
        self._creator: asyncio.Task[None] | None = None

    async def start(self) -> None:
        client = AIOKafkaAdminClient(**self._settings.client_kwargs())
        self._client = client
        await client.start()

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def require(self) -> AIOKafkaAdminClient:
        """The started admin client (RuntimeError before :meth:`start`)."""
        if self._client is None:
            raise RuntimeError("the Kafka transport is not started")
        return self._client

    async def ensure_topics(self, topics: Sequence[str], partitions: int | None = None) -> None:
        """Create the topics that do not exist yet, with ``partitions`` partitions
        (default: the settings').

        The topics asked for by every caller in one loop iteration are created
        with one CreateTopics request: a bus starting many agents at once, each
        subscribing its inbox, makes one request, not one per agent.
        """
        waiting = []
        for topic in topics:
            if topic in self.known_topics:
                continue
            check_topic_name(topic)
            pending = self._creating.get(topic)
            if pending is None:
                count = 1 if topic in self._private else partitions or self._settings.partitions
                pending = self._queue_creation(topic, count)
            waiting.append(pending)
        for pending in waiting:
            await asyncio.shield(pending)

    def _queue_creation(self, topic: str, partitions: int) -> asyncio.Future[None]:
        """The creation of ``topic``, in the request sent once this loop iteration's
        callers have queued theirs."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._creating[topic] = future
        if not self._queued:
            self._creator = loop.create_task(self._create_queued(), name="kafka-create-topics")
        self._queued.append((topic, partitions))
        return future

    async def _create_queued(self) -> None:
        topics, self._queued = self._queued, []
        try:
            errors = await self._create(topics)
        except asyncio.CancelledError:
            for topic, _ in topics:
                self._creating.pop(topic).cancel()
            raise
        except Exception as exc:
            errors = {topic: exc for topic, _ in topics}
        for topic, _ in topics:
            future = self._creating.pop(topic)
            error = errors.get(topic)
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
                future.exception()  # retrieved here; waiters re-raise it

    def created(self, topic: str) -> bool:
        return topic in self._created

    def known(self, topic: str) -> bool:
        return topic in self.known_topics

    def declare_compacted(self, topic: str) -> None:
        # A topic that exists already keeps its configuration: the cluster's owner decides.
        self._compacted.add(topic)

    def declare_private(self, topic: str) -> None:
        # As for compaction, a topic that exists already keeps its partitions.
        self._private.add(topic)

    async def _create(self, topics: list[tuple[str, int]]) -> dict[str, BaseException]:
        """Create ``topics`` (names and partitions) in one request; the error of
        each that failed."""
        admin = self.require()
        s = self._settings
        configs = {}
        if s.min_insync_replicas is not None:
            configs["min.insync.replicas"] = str(s.min_insync_replicas)
        compact = {**configs, "cleanup.policy": "compact"}
        self._metrics.create_requests += 1
        response = await admin.create_topics(
            [
                NewTopic(
                    t,
                    partitions,
                    s.replication_factor,
                    topic_configs=compact if t in self._compacted else configs or None,
                )
                for t, partitions in topics
            ]
        )
        errors: dict[str, BaseException] = {}
        for entry in response.topic_errors:
            topic, code = entry[0], entry[1]
            if code == 0:
                self._metrics.topics_created += 1
                self._created.add(topic)
            elif code != TopicAlreadyExistsError.errno:
                message = entry[2] if len(entry) > 2 else ""
                errors[topic] = KafkaError(f"cannot create topic {topic!r}: error {code} {message}")
                continue
            self.known_topics.add(topic)
        return errors

    async def list_topics(self) -> list[str]:
        return await self.require().list_topics()

    async def partitions(self, topics: Sequence[str]) -> list[TopicPartition]:
        """The partitions of those of ``topics`` that exist, per the cluster metadata."""
        described = await self.require().describe_topics(list(topics))
        return [
            TopicPartition(entry["topic"], partition["partition"])
            for entry in described
            if entry["error_code"] == 0
            for partition in entry["partitions"]
        ]

    async def committed_offsets(
        self, group: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[int, str]]:
        """The group's committed offset and commit metadata per partition (of
        ``partitions``, -1 for one without a commit; else of every partition it
        committed)."""
        found = await self.require().list_consumer_group_offsets(
            group, partitions=None if partitions is None else list(partitions)
        )
        return {tp: (meta.offset, meta.metadata or "") for tp, meta in found.items()}

    async def consumer_groups(self) -> list[str]:
        """The names of the cluster's consumer groups."""
        return [str(entry[0]) for entry in await self.require().list_consumer_groups()]

    async def group_topics(self, groups: Sequence[str]) -> dict[str, set[str]]:
        """The topics that the members of each of ``groups`` subscribe to now (a
        group without members is left out)."""
        found: dict[str, set[str]] = {}
        pending = list(groups)
        for _ in range(_DESCRIBE_ATTEMPTS):
            described = await self._describe(pending)
            pending = [name for name, topics in described.items() if topics is None]
            found.update((n, t) for n, t in described.items() if t)
            if not pending:
                break
            await asyncio.sleep(_DESCRIBE_RETRY)
        if pending:
            log.warning("groups %s kept rebalancing: their subscriptions are unknown", pending)
        return found

    async def _describe(self, groups: Sequence[str]) -> dict[str, set[str] | None]:
        """Each group's subscribed topics; None for a group in a rebalance (a member
        whose metadata is still empty: its subscription is not known yet)."""
        admin = self.require()
        # One group per request: aiokafka misreads a response describing several.
        described = await asyncio.gather(*(admin.describe_consumer_groups([g]) for g in groups))
        found: dict[str, set[str] | None] = {}
        for response in (r for responses in described for r in responses):
            for description in response.groups:
                error, name, _state, protocol_type, _protocol, members = description[:6]
                if error or protocol_type != "consumer":
                    continue
                # (member_id, [group_instance_id,] client_id, client_host, metadata,
                # assignment): the metadata is second to last.
                metadata = [member[-2] for member in members]
                if not all(metadata):
                    found[name] = None
                    continue
                topics: set[str] = set()
                for each in metadata:
                    topics.update(ConsumerProtocol.METADATA.decode(each).subscription)
                found[name] = topics
        return found
