"""A member of an in-memory consumer group (transport/memory/subscription.py): how its
handler is run, and where a failed handling goes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable

from a2a_bus.protocol import CloudEvent, new_event, to_kafka
from a2a_bus.transport.base import Delivery, Transport
from a2a_bus.transport.memory.subscription import MAX_EAGER_DEPTH
from a2a_bus.transport.memory.transport import MemoryTransport

WAIT = 30.0
HOPS = 3 * MAX_EAGER_DEPTH


def _event(n: int) -> CloudEvent:
    return new_event({"source": "test", "type": "t.n"}, {"n": n})


def _depth() -> int:
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


async def test_a_handler_that_raises_before_it_awaits_anything_is_dead_lettered() -> None:
    # A plain function as handler: it raises when called, before returning an awaitable.
    transport: Transport = MemoryTransport(dlq_topic="t.dlq")
    await transport.start()
    dead: list[Delivery] = []

    def broken(delivery: Delivery) -> Awaitable[None]:
        raise ValueError("bad number")

    async def on_dead_letter(delivery: Delivery) -> None:
        dead.append(delivery)

    await transport.subscribe(["t.broken"], "g", broken)
    await transport.subscribe(["t.dlq"], "dlq-reader", on_dead_letter)
    await transport.publish("t.broken", _event(1))  # the publisher is not the one to fail
    async with asyncio.timeout(WAIT):
        while not dead:
            await asyncio.sleep(0.001)
    headers = dict(dead[0].headers)
    assert headers["a2a-dlq-reason"] == b"handler-error: ValueError: bad number"
    assert dead[0].event.get_data() == {"n": 1}
    assert transport.dead_lettered == 1 and transport.lag()["g"] == 0
    await transport.stop()


async def test_a_raw_record_whose_handler_raises_is_dead_lettered_as_kafka_does() -> None:
    """Bytes from a producer outside the bus: set aside as they came, with the reason
    and the id of the event they held, the headers the Kafka transport writes too."""
    transport = MemoryTransport(dlq_topic="t.dlq")
    await transport.start()
    dead: list[Delivery] = []

    async def broken(delivery: Delivery) -> None:
        raise ValueError("bad number")

    async def on_dead_letter(delivery: Delivery) -> None:
        dead.append(delivery)

    await transport.subscribe(["t.raw"], "g", broken)
    await transport.subscribe(["t.dlq"], "dlq-reader", on_dead_letter)
    event = _event(2)
    record = to_kafka(event, "structured")
    await transport.publish_raw("t.raw", record.value, headers=record.headers)
    async with asyncio.timeout(WAIT):
        while not dead:
            await asyncio.sleep(0.001)
    headers = dict(dead[0].headers)
    assert headers["a2a-dlq-reason"] == b"handler-error: ValueError: bad number"
    assert headers["a2a-dlq-event-id"] == event.get_id().encode()
    assert dead[0].event.get_id() == event.get_id()
    await transport.stop()


async def test_handlers_that_publish_start_inside_one_another_only_so_deep() -> None:
    """A handler that publishes starts the next handler in its own call (no loop
    iteration between them), but at most MAX_EAGER_DEPTH deep: past it the next
    starts from the loop, so a long chain never deepens the stack without bound."""
    transport = MemoryTransport(dlq_topic="t.dlq")
    await transport.start()
    depths: list[int] = []
    done = asyncio.get_running_loop().create_future()

    async def hop(delivery: Delivery) -> None:
        depths.append(_depth())
        n = delivery.event.get_data()["n"]  # type: ignore[index]
        if n + 1 < HOPS:
            await transport.publish(f"t.hop{n + 1}", _event(n + 1))
        else:
            done.set_result(None)

    for n in range(HOPS):
        await transport.subscribe([f"t.hop{n}"], f"g{n}", hop)
    await transport.publish("t.hop0", _event(0))
    await asyncio.wait_for(done, WAIT)
    assert len(depths) == HOPS
    # The first MAX_EAGER_DEPTH start each inside the one before (the first inside
    # the test's publish), each deeper; the next starts afresh from the loop.
    first = depths[:MAX_EAGER_DEPTH]
    assert first == sorted(first) and len(set(first)) == len(first), depths
    assert depths[MAX_EAGER_DEPTH] < depths[MAX_EAGER_DEPTH - 1], depths
    # However long the chain, no handler runs deeper than a few nested starts.
    step = depths[1] - depths[0]
    assert max(depths) <= depths[0] + MAX_EAGER_DEPTH * step, depths
    await transport.stop()
