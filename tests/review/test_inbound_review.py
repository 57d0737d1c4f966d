"""Caller -> agent stream sessions (a2a_bus.inbound, a2a_bus.streams.InboundStream)."""

from __future__ import annotations

import asyncio
import gc
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import ClassVar

from a2a_bus import Agent, Bus, method
from a2a_bus.streams import InboundStream
from tests.bus.test_behaviour import WAIT, eventually, make_bus

__all__ = ["make_bus"]

MakeBus = Callable[..., Awaitable[Bus]]


class Summer(Agent):
    agent_id = "summer"
    started: ClassVar[set[str]] = set()

    @method
    def total(self, numbers: Iterator[int], token: str = "") -> int:
        self.started.add(token)
        return sum(numbers)

    @method
    def ping(self) -> int:
        return 1


async def _gated(items: list[int], gate: asyncio.Event) -> AsyncIterator[int]:
    yield items[0]
    await gate.wait()
    for item in items[1:]:
        yield item


async def test_an_answered_stream_is_not_kept_alive(make_bus: MakeBus) -> None:
    """Bug: InboundStreams._linger (a2a_bus/inbound.py) schedules ``forget`` 600 s
    after *every* handler ends, also for a stream whose end arrived and was answered
    (on_chunk already popped it). The timer's closure holds the session's entry --
    the InboundStream and the handler's future with its Outcome (the result) -- so every
    finished stream and its result stay in memory for 10 minutes (and one timer per
    stream sits in the loop): a replica answering many streams grows by
    rate x 600 s x (stream + result). Correct: once the end is answered nothing is
    kept; the linger only applies to a stream whose end has not come."""
    bus = await make_bus(Summer)
    [host] = bus.hosts
    client = bus.async_client()
    token = uuid.uuid4().hex
    gate = asyncio.Event()
    sending = asyncio.ensure_future(
        client.stream_to("summer", "total", _gated([1, 2, 3], gate), {"token": token})
    )
    await eventually(lambda: token in Summer.started)
    [(stream, _)] = [entry for entry in host.inbound._sessions.values()]
    assert isinstance(stream, InboundStream)
    alive = weakref.ref(stream)
    del stream
    gate.set()
    assert await asyncio.wait_for(sending, WAIT) == 6
    # The actor thread keeps a reference to the last message it handled: move it on.
    assert await asyncio.wait_for(client.request("summer", "ping"), WAIT) == 1

    def released() -> bool:
        gc.collect()
        return alive() is None

    await eventually(released, timeout=5.0)
