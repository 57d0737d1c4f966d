"""Agent -> caller streams at the caller: a reader that falls behind (the generator
has sent every chunk, and the caller's node holds them back until the reader makes
room: at most 1,024 wait in the stream). Both transports. The generator's side is
tested in tests/hosting/test_outbound.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import pytest

from a2a_bus import Bus, JsonRpcError
from a2a_bus.protocol import ErrorCode
from tests.agents import Ticker
from tests.buses import WAIT, eventually, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]

#: Chunks of a stream: well past what waits for the reader on its node.
CHUNKS = 3 * 1024
#: The per-chunk deadline of these streams.
TIMEOUT = 2.0


async def _read_one_then_fall_behind(bus: Bus) -> AsyncGenerator[Any, None]:
    """A stream whose first item was read and whose generator sent all the rest."""
    stream = bus.async_client().stream("ticker", "tick", [CHUNKS], timeout=TIMEOUT)
    assert await asyncio.wait_for(anext(stream), WAIT) == 0
    await eventually(Ticker.done.is_set)
    assert not Ticker.closed_early.is_set()
    return stream


async def _rest(stream: AsyncGenerator[Any, None]) -> list[Any]:
    return [item async for item in stream]


async def test_a_reader_behind_for_longer_than_the_deadline_gets_every_chunk(
    make_bus: MakeBus,
) -> None:
    """The deadline bounds the caller's wait for a chunk; here the chunks wait for it."""
    bus = await make_bus(Ticker)
    stream = await _read_one_then_fall_behind(bus)
    await asyncio.sleep(2 * TIMEOUT)  # the reader is busy elsewhere
    assert await asyncio.wait_for(_rest(stream), WAIT) == list(range(1, CHUNKS))
    assert bus.metrics.late_replies == 0
    await eventually(lambda: len(bus.dispatcher.correlator) == 0)


async def test_stop_with_a_reader_behind_ends_its_stream(make_bus: MakeBus) -> None:
    """The chunks waiting for the reader do not keep the bus from stopping."""
    bus = await make_bus(Ticker)
    stream = await _read_one_then_fall_behind(bus)
    await asyncio.wait_for(bus.astop(), WAIT)
    items = [0]
    with pytest.raises(JsonRpcError) as error:
        async for item in stream:
            items.append(item)
    assert error.value.code == ErrorCode.AGENT_UNAVAILABLE
    assert items == list(range(len(items)))  # what came before the end, in order
    assert len(bus.dispatcher.correlator) == 0
