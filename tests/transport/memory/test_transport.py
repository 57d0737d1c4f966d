"""The in-memory transport's figures for metrics: consumer lag and dead letters."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from types import FrameType

import pytest

from a2a_bus.bench.agents_scale import agent_classes
from a2a_bus.bus import Bus
from a2a_bus.protocol import CloudEvent, new_event
from a2a_bus.transport.base import Delivery, Transport
from a2a_bus.transport.memory.transport import MemoryTransport

WAIT = 30.0


def _event(n: int) -> CloudEvent:
    return new_event({"source": "test", "type": "t.n"}, {"n": n})


async def test_lag_counts_records_not_handled_yet_per_group() -> None:
    transport = MemoryTransport(partitions=2)
    await transport.start()
    release = asyncio.Event()
    handled: list[Delivery] = []

    async def slow(delivery: Delivery) -> None:
        await release.wait()
        handled.append(delivery)

    async def fast(delivery: Delivery) -> None:
        handled.append(delivery)

    await transport.subscribe(["t.lag"], "slow-group", slow)
    await transport.subscribe(["t.lag"], "fast-group", fast)
    for n in range(5):
        await transport.publish("t.lag", _event(n))
    await asyncio.sleep(0)  # let the fast group's handlers run
    assert transport.lag() == {"slow-group": 5, "fast-group": 0}
    release.set()
    async with asyncio.timeout(WAIT):
        while transport.lag()["slow-group"]:
            await asyncio.sleep(0.001)
    assert len(handled) == 10
    await transport.stop()
    assert transport.lag() == {}  # no members left


async def test_dead_lettered_counts_undecodable_records() -> None:
    transport: Transport = MemoryTransport(dlq_topic="t.dlq")
    await transport.start()
    seen: list[Delivery] = []

    async def handler(delivery: Delivery) -> None:
        seen.append(delivery)

    await transport.subscribe(["t.in"], "g", handler)
    assert transport.dead_lettered == 0
    await transport.publish_raw("t.in", b"not json")
    await transport.publish_raw("t.in", b'{"jsonrpc": "2.0", "method": "ok"}')
    async with asyncio.timeout(WAIT):
        while not seen:
            await asyncio.sleep(0.001)
    assert transport.dead_lettered == 1
    assert [d.event.get_extension("a2amethod") for d in seen] == ["ok"]
    await transport.stop()


@pytest.mark.parametrize("dedup", [True, False], ids=["dedup", "no-dedup"])
async def test_copies_of_an_event_reach_a_subscription_once_unless_it_opts_out(
    dedup: bool,
) -> None:
    transport = MemoryTransport()
    await transport.start()
    seen: list[int] = []

    async def handler(delivery: Delivery) -> None:
        seen.append(delivery.event.get_data()["n"])  # type: ignore[index]

    await transport.subscribe(["t.copies"], "g", handler, dedup=dedup)
    original = _event(1)
    for copy in (original, original, _event(2)):
        await transport.publish("t.copies", copy, key=b"same")
    assert seen == ([1, 2] if dedup else [1, 1, 2])
    assert transport.duplicates_skipped == (1 if dedup else 0)
    await transport.stop()


async def test_declared_compacted_topics_keep_the_latest_record_per_key() -> None:
    from a2a_bus.bus import Bus

    bus = Bus.memory()  # declares its registry compacted
    transport = bus.transport
    assert isinstance(transport, MemoryTransport)
    await transport.start()
    for n in range(3):
        await transport.publish(bus.topics.registry, _event(n), key=b"agent-a")
        await transport.publish("t.plain", _event(n), key=b"agent-a")
    cards = await transport.read(bus.topics.registry, limit=10)
    plain = await transport.read("t.plain", limit=10)
    assert [e.get_data() for e in cards.events] == [{"n": 2}]
    assert len(plain.events) == 3
    with pytest.raises(RuntimeError, match="in use"):
        transport.declare_compacted("t.plain")
    await transport.stop()


async def test_a_non_durable_group_forgets_its_progress_when_empty() -> None:
    transport = MemoryTransport(partitions=2)
    await transport.start()
    seen: list[Delivery] = []

    async def handler(delivery: Delivery) -> None:
        seen.append(delivery)

    kept = await transport.subscribe(["t.live"], "kept", handler)
    passing = await transport.subscribe(["t.live"], "passing", handler, durable=False)
    for n in range(3):
        await transport.publish("t.live", _event(n))
    async with asyncio.timeout(WAIT):
        while len(seen) < 6:
            await asyncio.sleep(0.001)
    assert transport.committed("kept", "t.live") == transport.committed("passing", "t.live") == 3
    await kept.stop()
    await passing.stop()
    assert transport.committed("kept", "t.live") == 3
    assert transport.committed("passing", "t.live") == 0
    assert "passing" not in transport.lag() and "kept" not in transport.lag()
    await transport.stop()


async def _calls_during(work: Awaitable[object]) -> int:
    """How many Python and C function calls this thread made while ``work`` ran
    (a count of the work done, not a timing)."""
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        await work
    finally:
        sys.setprofile(None)
    return calls


async def test_a_new_group_costs_the_same_however_many_groups_exist() -> None:
    transport = MemoryTransport()
    await transport.start()

    async def handler(delivery: Delivery) -> None:
        return None

    async def join(n: int) -> None:
        await transport.subscribe([f"t.inbox.{n}"], f"t.inbox.{n}", handler)

    for n in range(10):
        await join(n)
    early = await _calls_during(join(10))
    for n in range(11, 1000):
        await join(n)
    late = await _calls_during(join(1000))
    # Quadratic before: every join scanned every group's members and assignments.
    assert late <= early + 10, (early, late)
    await transport.stop()


async def test_spawning_an_agent_costs_the_same_with_10_or_500_agents_hosted() -> None:
    agents = agent_classes(502)
    async with Bus.memory(heartbeat=3600.0) as bus:
        for agent in agents[:10]:
            await bus.aspawn(agent)
        early = await _calls_during(bus.aspawn(agents[10]))
        for agent in agents[11:501]:
            await bus.aspawn(agent)
        late = await _calls_during(bus.aspawn(agents[501]))
        assert await bus.async_client().request("scaled-501", "echo", ["here"]) == "here"
    assert late <= early * 1.1, (early, late)
