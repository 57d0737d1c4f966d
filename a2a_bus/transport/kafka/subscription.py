"""A subscription of the Kafka transport in a consumer group of its own.

One :class:`~a2a_bus.transport.kafka.member.GroupMember` (a consumer) hands
every record of its topics to one
:class:`~a2a_bus.transport.kafka.target.Target` (the handler, its bounds and
de-duplication). The agent inboxes of a process share one member instead
(:mod:`a2a_bus.transport.kafka.inboxes`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from aiokafka import TopicPartition

from a2a_bus.transport.base import Handler, Subscription, TopicPattern, UndecodableHandler
from a2a_bus.transport.kafka.broker import Broker
from a2a_bus.transport.kafka.keys import KeyedRuns
from a2a_bus.transport.kafka.member import GroupMember
from a2a_bus.transport.kafka.target import OneTarget, Target


class KafkaSubscription(Subscription):
    """A running consumer group member with one handler for all its topics."""

    def __init__(
        self,
        transport: Broker,
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
        on_stop: Callable[[KafkaSubscription], None] = lambda subscription: None,
    ) -> None:
        self.group = group
        name = f"group {group}"
        self._target = Target(
            transport,
            handler,
            name,
            max_in_flight=max_in_flight,
            on_undecodable=on_undecodable,
            dead_letter=dead_letter,
            dedup=dedup,
            # Where no progress is kept, a record whose handler finishes at once
            # needs none of the handling's bookkeeping.
            at_once=not durable,
        )
        self._member = GroupMember(
            transport,
            topics,
            group,
            OneTarget(self._target),
            KeyedRuns(asyncio.get_running_loop(), name, transport.acks_at_once),
            from_beginning=from_beginning,
            durable=durable,
            fetch_max_wait_ms=transport.settings.fetch_wait_ms(durable),
        )
        self._on_stop = on_stop

    async def start(self) -> None:
        """Join the group and return once the first assignment is in place."""
        await self._member.start()

    async def stop(self, drain_timeout: float | None = None) -> None:
        """Stop fetching, let in-flight handlers finish (up to ``drain_timeout``
        seconds), commit what finished and leave the group."""
        await self._member.stop(drain_timeout=drain_timeout)
        self._on_stop(self)

    def pause(self) -> None:
        self._target.pause(True)

    def resume(self) -> None:
        self._target.pause(False)

    @property
    def assignment(self) -> set[TopicPartition]:
        """Partitions this member owns now."""
        return self._member.assignment

    @property
    def fetch_max_wait_ms(self) -> int:
        """How long the broker may hold an idle fetch of this subscription."""
        return self._member.fetch_max_wait_ms

    @property
    def in_flight(self) -> int:
        """Records being handled now."""
        return self._target.in_flight

    def lag(self) -> int:
        """Records of the assigned partitions not handled yet (in flight or not
        fetched), as of the last fetch response; no request to the broker."""
        return self._member.lag()
