"""A handler with an ``Iterator`` parameter that crashes: what a retry is given.

A stream sent as one array is replayed in full on each attempt; a caller's open
stream (``stream_to``) is retried only while the handler has read nothing from
it, else the crash is final: -32603 and a dead letter saying why. Both transports.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import ClassVar

import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method
from tests.buses import WAIT, assert_dead_not_retried, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]


class Summer(Agent):
    agent_id = "summer"
    #: Tokens whose first attempt has crashed already.
    crashed: ClassVar[set[str]] = set()
    #: The items each attempt read, per token.
    reads: ClassVar[dict[str, list[list[int]]]] = {}

    @method
    def total(self, numbers: Iterator[int], token: str, crash_at: int = 3) -> int:
        """The sum; the first attempt for ``token`` crashes on reading ``crash_at``
        (on being called, before reading, when ``crash_at`` is -1)."""
        first = token not in self.crashed
        seen = self.reads.setdefault(token, [])
        seen.append([])
        if first and crash_at == -1:
            self.crashed.add(token)
            raise RuntimeError("boom before reading")
        n = 0
        for x in numbers:
            seen[-1].append(x)
            if first and x == crash_at:
                self.crashed.add(token)
                raise RuntimeError("boom")
            n += x
        return n

    @method
    def head(self, numbers: Iterator[int]) -> int:
        """The first item; the rest of the stream is left unread."""
        return next(numbers)


async def test_a_retry_reads_the_whole_array_again(make_bus: MakeBus) -> None:
    bus = await make_bus(Summer)
    token = uuid.uuid4().hex
    params = {"numbers": [1, 2, 3, 4], "token": token}
    result = await asyncio.wait_for(bus.async_client().request("summer", "total", params), WAIT)
    assert result == 10
    assert Summer.reads[token] == [[1, 2, 3], [1, 2, 3, 4]]
    assert bus.metrics.redeliveries == 1
    assert bus.metrics.dead_letters == 0


async def test_a_retry_reads_a_positional_array_again(make_bus: MakeBus) -> None:
    bus = await make_bus(Summer)
    token = uuid.uuid4().hex
    result = await asyncio.wait_for(
        bus.async_client().request("summer", "total", [[1, 2, 3, 4], token]), WAIT
    )
    assert result == 10
    assert Summer.reads[token] == [[1, 2, 3], [1, 2, 3, 4]]


async def test_a_stream_param_that_is_not_an_array_is_invalid_params(make_bus: MakeBus) -> None:
    bus = await make_bus(Summer)
    with pytest.raises(JsonRpcError) as error:
        await asyncio.wait_for(
            bus.async_client().request("summer", "total", {"numbers": 5, "token": "t"}), WAIT
        )
    assert error.value.code == -32602
    assert "numbers: expected an array" in error.value.data


async def test_a_crash_after_reading_a_caller_stream_is_not_retried(make_bus: MakeBus) -> None:
    bus = await make_bus(Summer)
    token = uuid.uuid4().hex
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as error:
        await asyncio.wait_for(
            client.stream_to("summer", "total", iter([1, 2, 3, 4]), {"token": token}), WAIT
        )
    assert error.value.code == -32603
    assert Summer.reads[token] == [[1, 2, 3]]  # one attempt only
    await assert_dead_not_retried(bus, "RuntimeError: boom", "input stream was partly read")
    # The agent serves the next stream with a fresh instance.
    again = {"token": token}
    assert await asyncio.wait_for(client.stream_to("summer", "total", [5, 6], again), WAIT) == 11


async def test_a_crash_before_reading_a_caller_stream_is_retried(make_bus: MakeBus) -> None:
    bus = await make_bus(Summer)
    token = uuid.uuid4().hex
    params = {"token": token, "crash_at": -1}
    result = await asyncio.wait_for(
        bus.async_client().stream_to("summer", "total", [1, 2, 3, 4], params), WAIT
    )
    assert result == 10
    assert Summer.reads[token] == [[], [1, 2, 3, 4]]
    assert bus.metrics.redeliveries == 1
    assert bus.metrics.dead_letters == 0


def test_sync_client_gets_the_same_answers() -> None:
    with Bus.memory(heartbeat=60.0) as bus:
        bus.spawn(Summer)
        client = bus.client()
        token = uuid.uuid4().hex
        assert client.request("summer", "total", {"numbers": [1, 2, 3, 4], "token": token}) == 10
        with pytest.raises(JsonRpcError) as error:
            client.stream_to("summer", "total", iter([1, 2, 3, 4]), {"token": uuid.uuid4().hex})
        assert error.value.code == -32603


async def test_a_handler_that_stops_reading_early_is_answered(make_bus: MakeBus) -> None:
    # More chunks than the agent's stream buffer holds: without a reader the
    # chunks behind the buffer would wait for room forever, and the answer with them.
    bus = await make_bus(Summer)
    result = await asyncio.wait_for(
        bus.async_client().stream_to("summer", "head", range(7, 1300)), WAIT
    )
    assert result == 7
