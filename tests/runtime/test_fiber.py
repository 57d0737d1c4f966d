"""Fiber: a call run in slices on its own thread, and an InboundStream read from one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from a2a_bus.core.streams import InboundStream
from a2a_bus.protocol import ErrorCode, JsonRpcError
from a2a_bus.runtime.fiber import Fiber, FiberAborted


def test_slices_run_one_at_a_time_and_hand_back_the_result() -> None:
    trace: list[str] = []
    fibers: list[Fiber] = []

    def call() -> int:
        trace.append("first")
        fibers[0].park()
        trace.append("second")
        return 7

    fiber = Fiber(call, "t")
    fibers.append(fiber)
    assert fiber.run_slice() is False
    assert trace == ["first"]
    trace.append("actor")  # the actor's thread runs while the fiber is parked
    assert fiber.run_slice() is True
    assert trace == ["first", "actor", "second"]
    assert (fiber.result, fiber.error) == (7, None)
    assert fiber.run_slice() is True  # an ended fiber stays ended


def test_an_error_is_handed_to_the_actor() -> None:
    def call() -> None:
        raise ValueError("bad")

    fiber = Fiber(call, "t")
    assert fiber.run_slice() is True
    assert isinstance(fiber.error, ValueError)


def test_abort_unwinds_a_parked_call_past_except_exception() -> None:
    cleaned = threading.Event()
    fibers: list[Fiber] = []

    def call() -> None:
        try:
            fibers[0].park()
        except Exception:  # must not catch the abort
            pytest.fail("abort caught as an Exception")
        finally:
            cleaned.set()

    fiber = Fiber(call, "t")
    fibers.append(fiber)
    assert fiber.run_slice() is False
    fiber.abort()
    assert cleaned.is_set()
    assert fiber.finished and fiber.error is None
    with pytest.raises(FiberAborted):
        fiber.park()  # parking again after an abort unwinds at once


def test_current_names_the_fiber_only_on_its_thread() -> None:
    seen: list[Fiber | None] = []
    fiber = Fiber(lambda: seen.append(Fiber.current()), "t")
    fiber.run_slice()
    assert seen == [fiber]
    assert Fiber.current() is None


async def _read_in_fiber(stream: InboundStream) -> tuple[Fiber, list[int], asyncio.Event]:
    """Start a fiber summing ``stream``; its wake-ups run the next slice (as the actor does)."""
    items: list[int] = []
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()

    def read() -> list[int]:
        items.extend(stream)
        return items

    fiber = Fiber(read, "reader")

    def next_slice() -> None:
        if fiber.run_slice():
            ended.set()

    fiber.wake = lambda: loop.call_soon_threadsafe(next_slice)
    next_slice()
    return fiber, items, ended


async def test_a_parked_reader_is_woken_by_each_put_and_the_end() -> None:
    stream = InboundStream(asyncio.get_running_loop())
    fiber, items, ended = await _read_in_fiber(stream)
    assert not fiber.finished  # parked: nothing to read yet
    await stream.put(0, 10)
    await stream.put(1, 11)
    await asyncio.sleep(0.01)
    assert items == [10, 11] and not fiber.finished
    stream.close(2)
    await asyncio.wait_for(ended.wait(), 10)
    assert fiber.result == [10, 11] and fiber.error is None


async def test_a_parked_reader_gets_the_failure() -> None:
    stream = InboundStream(asyncio.get_running_loop())
    fiber, _, ended = await _read_in_fiber(stream)
    stream.fail(JsonRpcError(ErrorCode.STREAM_BROKEN, "Stream broken", "stopped"))
    await asyncio.wait_for(ended.wait(), 10)
    assert isinstance(fiber.error, JsonRpcError) and fiber.error.data == "stopped"


async def test_the_reader_gets_the_first_failure_not_the_ones_that_follow() -> None:
    """A stream failed on a chunk that did not fit, then its next chunk and its end
    came (a gap, since that chunk was never put): the reader gets the first reason,
    after the items before it."""
    stream = InboundStream(asyncio.get_running_loop())
    await stream.put(0, 10)
    stream.fail(JsonRpcError(ErrorCode.INVALID_PARAMS, "Invalid params", "numbers[1]"))
    await stream.put(2, 12)
    stream.close(3)
    fiber, items, ended = await _read_in_fiber(stream)
    await asyncio.wait_for(ended.wait(), 10)
    assert items == [10]
    assert isinstance(fiber.error, JsonRpcError) and fiber.error.data == "numbers[1]"


async def test_a_parked_reader_times_out_when_no_chunk_comes() -> None:
    stream = InboundStream(asyncio.get_running_loop(), idle_timeout=0.05)
    fiber, _, ended = await _read_in_fiber(stream)
    await asyncio.wait_for(ended.wait(), 10)
    assert isinstance(fiber.error, JsonRpcError)
    assert fiber.error.code == ErrorCode.STREAM_BROKEN
    assert "no chunk for 0.05s" in str(fiber.error.data)


def test_a_reader_outside_a_fiber_waits_on_its_thread() -> None:
    loop = asyncio.new_event_loop()
    try:
        stream = InboundStream(loop, idle_timeout=0.05)
        reader: Iterator[int] = iter(stream)
        with pytest.raises(JsonRpcError) as error:
            next(reader)
        assert error.value.code == ErrorCode.STREAM_BROKEN
    finally:
        loop.close()
