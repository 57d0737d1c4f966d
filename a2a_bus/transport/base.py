"""The transport contract shared by the in-memory and the Kafka transports.

A transport moves CloudEvents between topics and consumer groups. It knows
nothing about agents or JSON-RPC semantics: the bus layer decides which topic
an event goes to and what a handler does with it.

Semantics both transports honour (one behavioural test suite runs on both):

* ``publish`` writes an event to one topic once, whatever the number of
  subscribing groups (fan-out is done by groups, not by copies).
* Every consumer group receives every event of the topics it subscribes to;
  members of one group share the partitions (load sharing).
* Events with the same key keep their order (same partition).
* A handler's completion acknowledges the delivery (at-least-once): offsets are
  committed per partition in order, only up to the last contiguous finished one.
* A record that cannot be decoded never reaches a handler: it goes to the
  dead-letter topic with the reason, and is acknowledged.
* ``read`` pages through the records a topic retains without joining a group:
  it commits nothing, writes nothing (undecodable records are only counted)
  and leaves every group's progress as it was.

The records it hands out and takes back (:class:`Delivery`, :class:`Undecodable`,
:class:`DeadLetter`) are :mod:`a2a_bus.transport.deliveries`'s, named here too.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.transport.deliveries import Consumed as Consumed
from a2a_bus.transport.deliveries import DeadLetter as DeadLetter
from a2a_bus.transport.deliveries import Delivery as Delivery
from a2a_bus.transport.deliveries import Handler as Handler
from a2a_bus.transport.deliveries import Undecodable as Undecodable
from a2a_bus.transport.deliveries import UndecodableHandler as UndecodableHandler
from a2a_bus.transport.deliveries import report_undecodable as report_undecodable
from a2a_bus.transport.positions import Position


class ReadBatch(NamedTuple):
    """Retained events of one topic, and where the next read goes on."""

    events: list[CloudEvent]
    #: Next offset per partition: covers exactly the records this batch consumed.
    position: dict[int, int]
    #: Records skipped because they could not be decoded.
    undecodable: int = 0


#: The longest topic name any transport takes: Kafka's limit, held by all, so that
#: a name that works in memory works on Kafka too.
MAX_TOPIC_CHARS = 249
#: The characters a topic name may hold, and so each part of one (an agent id, a
#: subject's segment): match it with ``fullmatch`` (``$`` would let a final newline by).
TOPIC_NAME_CHARS = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class TopicPattern:
    """A regular expression over topic names, for wildcard subscriptions."""

    regex: str


def checked_topics(topics: Sequence[str] | TopicPattern) -> Sequence[str] | TopicPattern:
    """What ``subscribe`` accepts, the same on every transport: names or a pattern.

    A bare string is refused (it is a sequence of one-letter topic names to Python).
    """
    if isinstance(topics, str):
        raise TypeError("topics must be a sequence of names or a TopicPattern, not a str")
    if not isinstance(topics, TopicPattern) and not topics:
        raise ValueError("subscribe to at least one topic")
    return topics


class Subscription(abc.ABC):
    """A running subscription; stop it to leave the consumer group."""

    @abc.abstractmethod
    def pause(self) -> None:
        """Stop fetching new records (backpressure); in-flight work continues."""

    @abc.abstractmethod
    def resume(self) -> None:
        """Fetch again after :meth:`pause`."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Drain in-flight handlers, commit what finished, and leave the group."""


class Inboxes(abc.ABC):
    """The agent inboxes of one process: one topic per agent, consumed together.

    Every agent hosted in the process subscribes its inbox here. On Kafka one
    consumer serves all of them (not one per agent), in one consumer group shared
    by the processes that host the same set of agents; each request is handled by
    one member of that group. Per subscription: records with the same key are
    handed over one at a time and in order, at most ``max_in_flight`` at once, and
    :meth:`Subscription.pause` stops fetching that inbox alone.
    """

    @abc.abstractmethod
    async def subscribe(
        self, topic: str, handler: Handler, *, max_in_flight: int = 64
    ) -> Subscription:
        """Consume the inbox ``topic`` (from its oldest retained record when it was
        never consumed before: requests sent before the agent's first start wait
        for it); stopping the subscription leaves the others running."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop every inbox subscription (draining in-flight work)."""


class SharedGroupInboxes(Inboxes):
    """Inboxes as one consumer group per inbox topic, named after the topic.

    Right for a transport whose subscriptions cost nothing when idle (memory);
    replicas of an agent in several processes share its topic through the group.
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._subscriptions: list[Subscription] = []

    async def subscribe(
        self, topic: str, handler: Handler, *, max_in_flight: int = 64
    ) -> Subscription:
        subscription = await self._transport.subscribe(
            [topic], topic, handler, from_beginning=True, max_in_flight=max_in_flight
        )
        self._subscriptions.append(subscription)
        return subscription

    async def stop(self) -> None:
        subscriptions, self._subscriptions = self._subscriptions, []
        for subscription in subscriptions:
            await subscription.stop()


class Transport(abc.ABC):
    """Moves CloudEvents between topics; see the module docstring for guarantees."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect; after this returns the transport is ready."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop every subscription (draining in-flight work) and disconnect."""

    @abc.abstractmethod
    def publish(
        self,
        topic: str,
        event: CloudEvent,
        *,
        key: bytes | None = None,
        answering: Consumed | None = None,
    ) -> Awaitable[None]:
        """Write ``event`` to ``topic`` once; the awaitable is done when the write is
        acknowledged. A transport whose writes can wait (Kafka while the broker is
        away) returns an ``asyncio.Future``, so a caller can wait for something
        else meanwhile (a request's answer or deadline). A returned
        ``asyncio.Future`` also means the record was handed over already, in call
        order: a record published after it with the same key is not written
        before it, so the caller may publish the next one without waiting.

        ``answering``: the consumed record this event answers. Kafka in
        exactly_once mode writes it in the transaction that commits that record
        (the awaitable is done at once); otherwise it is written as any other."""

    @abc.abstractmethod
    async def publish_raw(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
        answering: Consumed | None = None,
    ) -> None:
        """Write raw bytes (raw JSON-RPC replies, dead letters) to ``topic``; a
        None value is a tombstone (it deletes ``key`` from a compacted topic).
        ``answering`` as for :meth:`publish`."""

    @abc.abstractmethod
    async def subscribe(
        self,
        topics: Sequence[str] | TopicPattern,
        group: str,
        handler: Handler,
        *,
        from_beginning: bool = False,
        max_in_flight: int = 64,
        on_undecodable: UndecodableHandler | None = None,
        durable: bool = True,
        dead_letter: bool = True,
        dedup: bool = True,
    ) -> Subscription:
        """Join consumer ``group`` on ``topics`` and hand each event to ``handler``.

        At most ``max_in_flight`` handlers run at once per subscription; events
        with the same key are handed over one at a time, in order. A record, or
        an element of a raw batch, that is no event is dead-lettered and then
        given to ``on_undecodable`` (say, to answer its sender) before the record
        counts as handled.

        ``durable=False`` is for a group of one short-lived member that needs no
        progress kept (a live view, a node's reply topic): nothing is committed,
        so a restart starts again as ``from_beginning`` says (no redelivery, no
        redelivery flags), and the group leaves nothing behind once it is empty.

        ``dead_letter=False`` leaves undecodable records (tombstones among them)
        to ``on_undecodable`` alone, which gets their value: for a reader that
        decides itself what to report (the agent registry).

        ``dedup=False`` hands every copy of an event (same source and id) to the
        handler: for a reader that counts the records it has read and applies a
        copy harmlessly (the agent registry, read to its end at each start).
        """

    def inboxes(self, group_prefix: str) -> Inboxes:
        """The inbox consumer of this process; its consumer groups are named
        ``<group_prefix>...``. Stopping the transport stops it."""
        return SharedGroupInboxes(self)

    @abc.abstractmethod
    async def read(
        self, topic: str, *, limit: int, position: Position | None = None, newest: bool = False
    ) -> ReadBatch:
        """Read retained records of ``topic`` without joining a consumer group.

        From the oldest retained record, or after ``position`` (a previous
        batch's), or with ``newest`` the last ``limit`` records; partitions are
        merged by record time, each partition in order. At most ``limit``
        events (1..1000), except that one raw JSON-RPC batch record is never
        split; an empty batch means nothing more was retained when it was
        read. After ``newest`` the position is the ends that were read up to.
        Undecodable records are skipped and counted; an unknown topic gives an
        empty batch. A ``position`` naming a partition the topic does not have
        raises ValueError.
        """

    @abc.abstractmethod
    async def end_offsets(self, topic: str) -> dict[int, int]:
        """The offset the next record of each partition of ``topic`` will get (empty
        for an unknown topic): a reader that has read every partition up to these
        has seen everything written before the call. Cheaper than :meth:`read`
        (Kafka: one offsets request, on a consumer kept for it)."""

    @property
    @abc.abstractmethod
    def ready(self) -> bool:
        """True once started and connected."""

    @property
    def connection_problem(self) -> str | None:
        """Why the transport cannot move events now (not started; on Kafka: the
        broker out of reach since the last look), or None. A cheap read from any
        thread (no I/O): a transport with a broker looks at it in the background."""
        return None if self.ready else "the transport is not started"

    @abc.abstractmethod
    def declare_compacted(self, topic: str) -> None:
        """Keep only the latest record per key of ``topic`` (Kafka: created with
        ``cleanup.policy=compact``). Declare it before the topic is first used."""

    @abc.abstractmethod
    def declare_private(self, topic: str) -> None:
        """Only one consumer, this process's, ever reads ``topic`` (a node's reply
        topic): Kafka creates it with one partition, as more would spread nothing
        and each answer would pay the key hash that picks one. Declare it before
        the topic is first used."""

    @property
    def in_process(self) -> bool:
        """True when every subscriber is in this process (the memory transport)."""
        return False

    @abc.abstractmethod
    async def dead_letter(self, letter: DeadLetter) -> None:
        """Write ``letter`` to the dead-letter topic. Never raises: a dead letter that
        cannot be written is logged as lost (one bad record must not stall its
        partition), and one read from the dead-letter topic is not written back."""

    @property
    def dead_lettered(self) -> int:
        """Records written to the dead-letter topic through this transport (its own
        and the bus's)."""
        return 0

    @property
    def duplicates_skipped(self) -> int:
        """Copies of an event its subscribers skipped (de-duplication by source and id)."""
        return 0

    @property
    def redelivered(self) -> int:
        """Records handled with the redelivery mark: handed out before, to a consumer
        that went away before it committed them (none in one process's memory)."""
        return 0

    def lag(self) -> dict[str, int]:
        """Records not handled yet, per consumer group with members in this process.

        A cheap snapshot from state the transport already has (no broker
        round trip); ``{}`` when the transport cannot tell.
        """
        return {}

    async def __aenter__(self) -> Transport:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
