"""What a transport hands out and takes back, record by record: a
:class:`Delivery` per event for a handler, an :class:`Undecodable` record for a
subscription's ``on_undecodable``, and the :class:`DeadLetter` and ``Consumed``
position a writer hands to the transport. Part of the transport contract
(:mod:`a2a_bus.transport.base`, which names them too).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple, Protocol

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Failure

# The contract's logger, as before these records left a2a_bus.transport.base.
log = logging.getLogger("a2a_bus.transport.base")


class Delivery(NamedTuple):
    """One event handed to a subscription handler.

    A named tuple rather than a frozen dataclass: one is built per record, and a
    frozen dataclass's ``__init__`` costs five times as much.
    """

    event: CloudEvent
    topic: str
    partition: int = 0
    offset: int = -1
    key: bytes | None = None
    #: True when this record may have been handled before (crash, rebalance).
    redelivered: bool = False
    #: True when the record was raw JSON-RPC rather than a CloudEvent, so that
    #: replies can be produced in the same raw form.
    raw: bool = False
    headers: tuple[tuple[str, bytes], ...] = ()


Handler = Callable[[Delivery], Awaitable[None]]


class Consumed(Protocol):
    """Where a consumed record was read: a :class:`Delivery` or an :class:`Undecodable`."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...


class DeadLetter(NamedTuple):
    """A record set aside, with why, for ``Transport.dead_letter``
    (:mod:`a2a_bus.transport.dead_letters` makes its headers)."""

    #: Where it was read.
    topic: str
    partition: int
    offset: int
    #: The record as it is written (its original value, key and headers).
    value: bytes | None
    key: bytes | None
    headers: Sequence[tuple[str, bytes]]
    reason: str
    #: Why it could not be decoded, as JSON-RPC errors (``a2a-dlq-error``).
    failures: Sequence[Failure] = ()
    #: The writer's own headers, after the dead-letter ones.
    extra: Sequence[tuple[str, bytes]] = ()


class Undecodable(NamedTuple):
    """A record that held no event a handler could take, after it was dead-lettered
    (unless its subscription has ``dead_letter=False``)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    #: Why, as JSON-RPC errors (-32700 for bad JSON, -32600 for an invalid message).
    failures: tuple[Failure, ...]
    #: The record's value (None: a tombstone).
    value: bytes | None = None


UndecodableHandler = Callable[[Undecodable], Awaitable[None]]


async def report_undecodable(
    handler: UndecodableHandler,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    headers: Sequence[tuple[str, bytes]],
    failures: Sequence[Failure],
    value: bytes | None = None,
) -> None:
    """Give an undecodable record to a subscription's ``on_undecodable``. Its
    failure is logged and the record still counts as handled."""
    undecodable = Undecodable(topic, partition, offset, key, tuple(headers), tuple(failures), value)
    try:
        await handler(undecodable)
    except Exception:
        log.exception(
            "on_undecodable failed at %s/%d/%d",
            undecodable.topic,
            undecodable.partition,
            undecodable.offset,
        )
