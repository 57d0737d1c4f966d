"""Reading the agent registry topic into a :class:`~a2a_bus.discovery.directory.Directory`.

Every bus reads the whole compacted registry at each start and follows it from
then on (:func:`follow_registry`). A record on it that is no card (junk from
another producer), or a card the directory does not take (a field of the wrong
type, an id that is no agent id or not its record's key), is dead-lettered
once, not at every start that reads it again: see :class:`RegistryReader`.
Tombstones (no value) delete a key and are no junk.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping

from a2a_bus.discovery.announcer import Announcer
from a2a_bus.discovery.directory import Directory
from a2a_bus.runtime.loops import stop_task
from a2a_bus.transport.base import DeadLetter, Delivery, Subscription, Transport, Undecodable
from a2a_bus.transport.dead_letters import delivered_letter, undecodable_letter

log = logging.getLogger(__name__)


class RegistryReader(Subscription):
    """Reads the registry into a :class:`Directory` and reports what is no card
    on it once.

    Every bus reads the whole registry at each start, and a junk record stays in
    the log until compaction removes it (on Kafka, once its segment is closed), so
    the transport does not dead-letter registry records (``dead_letter=False``):
    this reader does, and deletes what it reported.

    * Junk with a key is dead-lettered, then a tombstone for that key is written
      so that compaction removes it. One read at start (before the registry end
      as of the start) is held until the end is reached: if the key has a later
      record by then (a card, a "gone" event, a tombstone: whoever read it live
      already reported it), it is left alone. When the key is the id of a live
      agent, only the agent's own bus reports it, and publishes the agent's card
      again right after the tombstone.
    * Junk without a key (Kafka refuses one on a compacted topic; the in-memory
      transport takes it) cannot be compacted away: it is dead-lettered by the
      buses that read it after their start, when it arrives; a start that finds
      it in the log only logs it.
    * A tombstone is nothing: it deletes a key, and no card goes with it.

    A card the directory does not take is junk too (reason ``invalid-card: ...``),
    written as the structured CloudEvent it was read as.
    """

    def __init__(
        self,
        transport: Transport,
        topic: str,
        directory: Directory,
        announcer: Announcer | None = None,
    ) -> None:
        self._transport = transport
        self._topic = topic
        self._directory = directory
        self._announcer = announcer
        self._subscription: Subscription | None = None
        #: Junk read before the catch-up ended: keyed (by key, the latest), keyless.
        self._held: dict[bytes, DeadLetter] = {}
        self._keyless: list[DeadLetter] = []
        #: The registry ends as of the start, once they were reached (None before).
        self._ends: Mapping[int, int] | None = None
        self._catching_up: asyncio.Task[None] | None = None
        self._read_error: str | None = None

    async def start(self, group: str, timeout: float) -> None:
        """Subscribe from the beginning, and return once the registry is applied up
        to the ends it has now (or after ``timeout`` seconds, with a warning)."""
        self._subscription = await self._transport.subscribe(
            [self._topic],
            group,
            self._on_event,
            from_beginning=True,
            max_in_flight=1,  # applied in offset order: see Directory.reach
            on_undecodable=self._on_undecodable,
            durable=False,  # read whole at each start: nothing to keep
            dead_letter=False,  # what is junk is decided here
            # Each record is counted to know the end was reached: a copy skipped
            # as a duplicate would never be (applying a card again is harmless).
            dedup=False,
        )
        self._catching_up = asyncio.create_task(self._catch_up())
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._catching_up)
        except TimeoutError:
            # Reading goes on; junk read before the end is still held until then.
            log.warning(
                "agent registry %r: %s; starting anyway (agents not seen yet are unknown "
                "until their next heartbeat)",
                self._topic,
                self._read_error or f"not read to its end within {timeout:g}s",
            )

    async def _catch_up(self) -> None:
        ends = await self._ends_now()
        await self._directory.reach(ends)
        # From here on, junk is reported as it is read.
        self._ends = ends
        held, self._held = list(self._held.values()), {}
        keyless, self._keyless = self._keyless, []
        for letter in held:
            await self._report(letter)
        for letter in keyless:
            if letter.offset >= ends.get(letter.partition, 0):
                await self._report(letter)  # it came after the start: not reported yet
            else:
                log.warning(
                    "agent registry %r: record %d/%d (no key) holds no card: %s; left "
                    "alone (reported when it arrived; only compaction of a key removes "
                    "a record)",
                    self._topic,
                    letter.partition,
                    letter.offset,
                    letter.reason,
                )

    async def _ends_now(self) -> Mapping[int, int]:
        """The registry's ends (next offset per partition), retried until read."""
        delay = 0.5
        while True:
            try:
                # The position after the newest record of each partition is its end.
                return (await self._transport.read(self._topic, limit=1, newest=True)).position
            except Exception as exc:  # the broker failing the read
                if self._read_error is None:
                    log.warning("agent registry %r: reading its end failed: %s", self._topic, exc)
                self._read_error = str(exc) or type(exc).__name__
                await asyncio.sleep(delay)
                delay = min(2 * delay, 5.0)

    async def _on_event(self, delivery: Delivery) -> None:
        try:
            problem = self._directory.apply(delivery)
            if problem is not None:
                await self._junk(_invalid_card(delivery, problem))
            elif delivery.key is not None:
                self._held.pop(delivery.key, None)  # a later record of its key: left alone
        finally:
            self._directory.count_read(delivery.partition, delivery.offset)

    async def _on_undecodable(self, record: Undecodable) -> None:
        try:
            if record.value is None:  # a tombstone: the key is deleted, nothing to apply
                if record.key is not None:
                    self._held.pop(record.key, None)
            else:
                await self._junk(
                    undecodable_letter(
                        record.topic,
                        record.partition,
                        record.offset,
                        record.value,
                        record.key,
                        record.headers,
                        record.failures,
                    )
                )
        finally:
            self._directory.count_read(record.partition, record.offset)

    async def _junk(self, letter: DeadLetter) -> None:
        """Report ``letter`` now, or hold it until the catch-up ends (see the class)."""
        if self._ends is not None:
            await self._report(letter)
        elif letter.key is not None:
            self._held[letter.key] = letter
        else:
            self._keyless.append(letter)

    async def _report(self, letter: DeadLetter) -> None:
        """Dead-letter a junk record and delete its key from the registry."""
        agent_id = None if letter.key is None else letter.key.decode(errors="replace")
        directory = self._directory
        if agent_id and not directory.hosts(agent_id) and directory.card(agent_id) is not None:
            # The key of a live agent elsewhere: its host reports it (it reads the
            # registry too) and publishes its card right after the tombstone.
            return
        try:
            await self._transport.dead_letter(letter)
            if agent_id is None:
                return
            await self._transport.publish_raw(self._topic, None, key=letter.key)
            if self._announcer is not None and self._directory.hosts(agent_id):
                await self._announcer.renew(agent_id)
        except Exception:
            log.exception(
                "agent registry %r: reporting record %d/%d failed",
                self._topic,
                letter.partition,
                letter.offset,
            )

    # -- Subscription ---------------------------------------------------------------

    def pause(self) -> None:
        if self._subscription is not None:
            self._subscription.pause()

    def resume(self) -> None:
        if self._subscription is not None:
            self._subscription.resume()

    async def stop(self) -> None:
        task, self._catching_up = self._catching_up, None
        await stop_task(task)
        if self._subscription is not None:
            await self._subscription.stop()


async def follow_registry(
    transport: Transport,
    topic: str,
    group: str,
    directory: Directory,
    timeout: float,
    *,
    announcer: Announcer | None = None,
) -> Subscription:
    """Subscribe ``directory`` to the registry ``topic`` from its beginning, and
    return once it has applied the registry up to the ends it has now (or after
    ``timeout`` seconds, with a warning), so that every agent already running
    elsewhere is known before the first request. Junk on it goes to the
    dead-letter topic once (see :class:`RegistryReader`)."""
    reader = RegistryReader(transport, topic, directory, announcer)
    # A group of its own at each start: read from the beginning also when
    # ``group`` is reused (a fixed node id), since a group resumes at its commit.
    await reader.start(f"{group}.{uuid.uuid4().hex[:8]}", timeout)
    return reader


def _invalid_card(delivery: Delivery, problem: str) -> DeadLetter:
    """The dead letter of a card the directory did not take: the event as a
    structured CloudEvent, or without a value when it cannot be written back (it
    nests deeper than orjson writes; the transport has the original bytes only)."""
    reason = f"invalid-card: {problem}"
    try:
        return delivered_letter(delivery, reason)
    except TypeError as exc:  # orjson.JSONEncodeError
        return DeadLetter(
            delivery.topic,
            delivery.partition,
            delivery.offset,
            None,
            delivery.key,
            delivery.headers,
            f"{reason} (its value is left out: {exc})",
        )
