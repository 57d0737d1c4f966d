"""The agent inboxes of a process on Kafka: one consumer for all of them.

:class:`KafkaInboxes` serves every inbox topic of the process with one
:class:`~a2a_bus.transport.kafka.member.GroupMember` in the group of the set of
topics (:mod:`a2a_bus.transport.kafka.groups`); each inbox is a
:class:`~a2a_bus.transport.kafka.target.Target` of it, with its own handler,
in-flight bound and pause. Adding or removing an inbox changes the set, so the
member is replaced by one in the new set's group. Subscribes and stops that
arrive while a replacement is under way are served together by the next one
(:mod:`a2a_bus.transport.kafka.changes` holds them meanwhile), so a process
starting many agents at once rejoins a few times, not once per agent.

A replacement leaves the old group after committing what finished, without
waiting for running handlers: the new member fetches their records again and
de-duplication holds each copy until its original finished (one
:class:`~a2a_bus.transport.kafka.keys.KeyedRuns` serves the successive
members, so the per-key order holds across them too).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from aiokafka.errors import KafkaError

from a2a_bus.runtime.loops import stop_task
from a2a_bus.transport.base import Handler, Inboxes, Subscription
from a2a_bus.transport.kafka.broker import Broker, check_topic_name
from a2a_bus.transport.kafka.changes import Changes
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.dispatch import RETRY_DELAY
from a2a_bus.transport.kafka.groups import InboxConflict, composition_group, survey
from a2a_bus.transport.kafka.keys import Handling, KeyedRuns
from a2a_bus.transport.kafka.member import GroupMember
from a2a_bus.transport.kafka.ownership import Handover
from a2a_bus.transport.kafka.target import Target

log = logging.getLogger(__name__)

#: Longest pause between attempts to rejoin after a failure.
_MAX_RETRY_DELAY = 10.0
#: Idle fetch wait per partition consumed: an idle fetch costs aiokafka ~25-50 us
#: of Python per partition (building the request, reading the response), so an
#: idle inbox consumer spends about 2-3% of a core whatever its size.
_WAIT_PER_PARTITION_MS = 1.5


def idle_fetch_wait(settings: KafkaSettings, partitions: int) -> int:
    """The inbox consumer's ``fetch_max_wait_ms`` for ``partitions`` partitions:
    1.5 ms each, at least ``fetch_max_wait_ms``, at most ``inbox_fetch_max_wait_ms``.

    A fetch returns as soon as a record arrives, so this only bounds idle waits,
    and how soon an inbox resumed after a pause is fetched again while the
    process's other inboxes are idle.
    """
    wait = max(settings.fetch_max_wait_ms, round(partitions * _WAIT_PER_PARTITION_MS))
    return min(settings.inbox_fetch_max_wait_ms, wait)


class _Refused(Exception):
    """Other compositions' groups consume some of the wanted topics."""

    def __init__(self, conflicts: dict[str, InboxConflict]) -> None:
        super().__init__(next(iter(conflicts.values())))
        self.conflicts = conflicts


class InboxSubscription(Subscription):
    """One agent's inbox in the process's inbox consumer."""

    def __init__(self, inboxes: KafkaInboxes, target: Target) -> None:
        self._inboxes = inboxes
        self._target = target

    @property
    def topic(self) -> str:
        assert self._target.topic is not None
        return self._target.topic

    @property
    def in_flight(self) -> int:
        """Records of this inbox being handled now."""
        return self._target.in_flight

    def pause(self) -> None:
        self._target.pause(True)

    def resume(self) -> None:
        self._target.pause(False)

    async def stop(self) -> None:
        """Drain this inbox's handlers, then rejoin without its topic (committing)."""
        await self._inboxes.unsubscribe(self._target)


class KafkaInboxes(Inboxes):
    """The inbox consumer of a process; see the module docstring."""

    def __init__(self, broker: Broker, group_prefix: str) -> None:
        self._broker = broker
        self._settings = broker.settings
        self.group_prefix = group_prefix
        self._targets: dict[str, Target] = {}
        self._runs: KeyedRuns | None = None
        self._member: GroupMember | None = None
        #: The topics of the current member (joined, or joining).
        self._composition: frozenset[str] = frozenset()
        self._changes = Changes()
        #: Inboxes subscribed without waiting for a join, not joined yet.
        self._unjoined: set[str] = set()
        #: Whether a member joined with some inboxes yet.
        self._joined = False
        self._composer: asyncio.Task[None] | None = None
        #: The stop of the member being replaced.
        self._retiring: asyncio.Future[None] | None = None
        self._closed = False

    @property
    def group(self) -> str | None:
        """The consumer group of the current member, if any."""
        return None if self._member is None else self._member.group

    def lag(self) -> dict[str, int]:
        """Records not handled yet in the current group (see ``Transport.lag``)."""
        member = self._member
        return {} if member is None else {member.group: member.lag()}

    # -- routing (for the member) ---------------------------------------------------

    def target(self, topic: str) -> Target | None:
        target = self._targets.get(topic)
        return None if target is None or target.stopping else target

    def targets(self) -> Iterable[Target]:
        return list(self._targets.values())

    # -- subscribing ----------------------------------------------------------------

    async def subscribe(
        self, topic: str, handler: Handler, *, max_in_flight: int = 64
    ) -> Subscription:
        if self._closed:
            raise RuntimeError("the inboxes are stopped")
        if not self._broker.ready:
            raise RuntimeError("the Kafka transport is not started")
        check_topic_name(topic)
        if topic in self._targets:
            raise ValueError(f"inbox {topic!r} is subscribed already")
        target = Target(
            self._broker, handler, f"inbox {topic}", topic=topic, max_in_flight=max_in_flight
        )
        if self._runs is None:
            self._runs = KeyedRuns(
                asyncio.get_running_loop(),
                f"inboxes {self.group_prefix}",
                self._broker.acks_at_once,
            )
        self._targets[topic] = target
        try:
            if self._joins_later(topic):
                self._unjoined.add(topic)
                self._start_composer()
            else:
                await self._recompose(target, present=True)
        except BaseException:
            self._unjoined.discard(topic)
            self._forget(target)
            raise
        return InboxSubscription(self, target)

    def _joins_later(self, topic: str) -> bool:
        """Whether the subscribe of ``topic`` returns before the consumer joins with
        it: when the consumer joined before (a join replaces it) and the transport
        does not know the topic. The next join creates it, with the other inboxes
        that came meanwhile, in one request; nothing published to it from now on is
        skipped (a topic never consumed is read from its first record). A process
        spawning agents one after another thus rejoins a few times, not once per
        agent. A topic the transport knows may be another composition's inbox: its
        subscribe waits for the join, which refuses it then."""
        return self._joined and not self._broker.known(topic)

    async def unsubscribe(self, target: Target) -> None:
        """Stop handing out ``target``'s records, drain its handlers (cancelling
        those still running after ``drain_timeout``) and rejoin without it."""
        if target.stopping:
            return
        target.stopping = True
        member = self._member
        if member is not None:
            await member.withdraw(target)
        runs = self._runs
        if runs is not None:

            def of_target(handling: Handling) -> bool:
                return handling.target is target

            if await runs.drain(of_target, self._settings.drain_timeout):
                if member is not None and member is self._member:
                    member.drop_queued(of_target)
                else:  # replaced meanwhile: that member committed already
                    target.release(len(runs.drop_queued(of_target)))
                running = runs.running(of_target)
                for handling in running:
                    handling.cancel()
                log.warning("%s: %d handlers cancelled at stop", target.name, len(running))
                await runs.drain(of_target, None)
        self._forget(target)
        if not self._closed:
            await self._recompose(target, present=False)

    def _forget(self, target: Target) -> None:
        assert target.topic is not None
        self._unjoined.discard(target.topic)
        if self._targets.get(target.topic) is target:
            del self._targets[target.topic]

    async def stop(self) -> None:
        """Stop every inbox: drain (up to ``drain_timeout``), commit, leave the group."""
        if self._closed:
            return
        self._closed = True
        composer = self._composer
        await stop_task(composer)
        self._fail(RuntimeError("the inboxes stopped"))
        if self._retiring is not None:
            await self._retiring
        member, self._member = self._member, None
        self._composition = frozenset()
        if member is not None:
            await member.stop(drain_timeout=self._settings.drain_timeout)
        runs = self._runs
        if runs is not None:  # handlers of earlier members still running
            await runs.drain(None, self._settings.drain_timeout)
            for handling in runs.running(None):
                handling.cancel()
            await runs.drain(None, None)

    # -- composition ----------------------------------------------------------------

    async def _recompose(self, target: Target, *, present: bool) -> None:
        """Wait until the current member's topics include ``target``'s (or not)."""
        done = self._changes.add(target, present=present)
        self._start_composer()
        await done

    def _start_composer(self) -> None:
        if self._composer is None or self._composer.done():
            self._composer = asyncio.create_task(
                self._compose(), name=f"kafka-inboxes-{self.group_prefix}"
            )

    def _wanted(self) -> frozenset[str]:
        return frozenset(topic for topic, target in self._targets.items() if not target.stopping)

    async def _compose(self) -> None:
        """Replace the member until its topics are the wanted ones; settle changes."""
        delay = RETRY_DELAY
        while not self._closed:
            if self._wanted() == self._composition:
                self._settle()
                return
            try:
                await self._switch()
            except _Refused as refused:
                if self._refuse(refused.conflicts):
                    continue  # without the refused inboxes at once
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_DELAY)
            except Exception as exc:
                if not self._changes:
                    log.error("inboxes %s: cannot rejoin: %s", self.group_prefix, exc)
                self._fail(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_DELAY)
            else:
                delay = RETRY_DELAY
                self._settle()

    async def _switch(self) -> None:
        """Leave the current group, then join the wanted composition's group."""
        await self._retire()
        wanted, group, handover = await self._prepare()
        if not wanted:
            return
        assert self._runs is not None
        partitions = len(await self._broker.partitions(sorted(wanted)))
        member = GroupMember(
            self._broker,
            sorted(wanted),
            group,
            self,
            self._runs,
            from_beginning=True,
            handover=handover,
            fetch_max_wait_ms=idle_fetch_wait(self._settings, partitions),
        )
        self._member, self._composition = member, wanted
        try:
            await member.start()
        except BaseException:
            await self._retire()
            raise
        self._joined = True
        log.info("inboxes %s: %d topics in group %s", self.group_prefix, len(wanted), group)

    async def _retire(self) -> None:
        """Stop the current member (running handlers go on)."""
        member, self._member = self._member, None
        self._composition = frozenset()
        if member is not None:
            # Not cancelled with the composer: a stop waits for it to end.
            self._retiring = asyncio.ensure_future(member.stop(drain_timeout=0, cancel=False))
            await asyncio.shield(self._retiring)

    async def _prepare(self) -> tuple[frozenset[str], str, Handover]:
        """The topics to join now, their group and handover, once no other
        composition's group consumes any of them; :class:`_Refused` if one still
        does after ``join_timeout`` (a process of another composition that is
        leaving, or one killed, gets that long)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.join_timeout
        while True:
            await self._create_unjoined()
            wanted = self._wanted()  # subscribes that came meanwhile join too
            if not wanted:
                return wanted, "", {}
            await self._broker.ensure_topics(sorted(wanted), self._settings.inbox_partitions)
            group = composition_group(self.group_prefix, wanted)
            problem: Exception
            try:
                found = await survey(self._broker, self.group_prefix, group, wanted)
            except KafkaError as exc:  # e.g. a group deleted while it was described
                problem = exc
            else:
                if not found.conflicts:
                    return wanted, group, found.handover
                problem = _Refused(found.conflicts)
            if loop.time() >= deadline:
                raise problem
            await asyncio.sleep(RETRY_DELAY)

    async def _create_unjoined(self) -> None:
        """Create the topics of the inboxes subscribed without waiting (one request
        for all); an inbox whose topic cannot be created is dropped, with an error
        logged, so that it holds up no other inbox."""
        topics = sorted(self._unjoined)
        results = await asyncio.gather(
            *(
                self._broker.ensure_topics([topic], self._settings.inbox_partitions)
                for topic in topics
            ),
            return_exceptions=True,
        )
        for topic, result in zip(topics, results, strict=True):
            if isinstance(result, Exception):
                log.error("inboxes %s: inbox %r not consumed: %s", self.group_prefix, topic, result)
                self._drop(topic)
            elif isinstance(result, BaseException):
                raise result

    def _drop(self, topic: str) -> None:
        target = self._targets.get(topic)
        if target is not None:
            self._forget(target)

    def _settle(self) -> None:
        """Resolve the changes the current composition satisfies."""
        self._unjoined -= self._composition
        self._changes.settle(self._composition)

    def _refuse(self, conflicts: dict[str, InboxConflict]) -> bool:
        """Fail the subscribes of ``conflicts``' topics, each with its own error.
        True if the others can be joined now; else every pending change fails
        with the conflict over an inbox the process had already."""
        for target in self._changes.refuse(conflicts):
            self._forget(target)
        for topic in self._unjoined & conflicts.keys():
            # Its subscribe returned already: dropped, so that it holds up no other inbox.
            log.error("inboxes %s: inbox not consumed: %s", self.group_prefix, conflicts[topic])
            self._drop(topic)
        kept = [error for topic, error in conflicts.items() if topic in self._wanted()]
        if not kept:
            return True
        log.error("inboxes %s: cannot rejoin: %s", self.group_prefix, kept[0])
        self._fail(kept[0])
        return False

    def _fail(self, error: BaseException) -> None:
        """Fail every pending change; the inboxes that were to be added are not."""
        for target in self._changes.fail(error):
            self._forget(target)
