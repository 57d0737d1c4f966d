"""Helpers for tests that run real buses on both transports.

``make_bus`` is a fixture: a test module imports it to run each of its tests on the
in-memory transport and on Kafka (that case needs a broker and is marked ``kafka``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

from a2a_bus import Bus, RestartPolicy
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.dead_letters import DLQ_REASON

WAIT = 30.0  # upper bound on any single await; never a performance assertion

T = TypeVar("T")
FAST_RESTARTS = RestartPolicy(max_retries=2, backoff_initial=0.001, backoff_max=0.01)


def _kafka_available() -> bool:
    try:
        import a2a_bus.transport.kafka.transport  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(
    params=[
        "memory",
        pytest.param(
            "kafka",
            marks=[
                pytest.mark.kafka,
                pytest.mark.skipif(not _kafka_available(), reason="Kafka transport missing"),
            ],
        ),
    ]
)
async def make_bus(request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Awaitable[Bus]]]:
    """A factory of started buses on the transport under test (stopped afterwards)."""
    kind = request.param
    bootstrap = None
    if kind == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
    prefix = f"t{uuid.uuid4().hex[:10]}"
    buses: list[Bus] = []

    async def make(*agents: Any, peer: Bus | None = None, **options: Any) -> Bus:
        """``peer``: another node on the same transport (in memory: the same one)."""
        options.setdefault("prefix", prefix)
        options.setdefault("heartbeat", 60.0)
        options.setdefault("restart_policy", FAST_RESTARTS)
        options.setdefault("request_timeout", WAIT)
        if kind == "memory" and peer is not None:
            bus = Bus(peer.transport, **options)
        elif kind == "memory":
            bus = Bus.memory(**options)
        else:
            bus = Bus.kafka(bootstrap, bus_options=options, metadata_max_age_ms=1000)
        for agent in agents:
            bus.spawn(*agent) if isinstance(agent, tuple) else bus.spawn(agent)
        await asyncio.wait_for(bus.astart(), WAIT)
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        await asyncio.wait_for(bus.astop(), WAIT)


async def eventually(
    predicate: Callable[[], T | None], what: str = "the condition", timeout: float = WAIT
) -> T:
    """Poll ``predicate()`` until it returns something true, and return that; fail
    the test, naming ``what``, after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
    return found


async def read_dlq(bus: Bus, count: int) -> list[Delivery]:
    """The first ``count`` dead letters of this bus's DLQ topic."""
    letters: list[Delivery] = []

    async def on_letter(delivery: Delivery) -> None:
        letters.append(delivery)

    group = f"{bus.topics.dlq}.reader.{uuid.uuid4().hex[:6]}"
    sub = await bus.transport.subscribe([bus.topics.dlq], group, on_letter, from_beginning=True)
    try:
        await eventually(lambda: len(letters) >= count)
    finally:
        await sub.stop()
    return letters


def header(delivery: Delivery, name: str) -> str:
    return dict(delivery.headers)[name].decode()


async def assert_dead_not_retried(bus: Bus, crash: str, why: str) -> None:
    """The bus's one dead letter is the crash ``crash``, final at its first attempt
    because (the reason says) ``why``."""
    [letter] = await read_dlq(bus, 1)
    reason = header(letter, DLQ_REASON)
    assert reason.startswith(f"handler-crash: {crash}; not retried: ")
    assert why in reason
    assert header(letter, "a2a-dlq-attempts") == "1"
    assert bus.metrics.redeliveries == 0
