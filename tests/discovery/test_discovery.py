"""Discovery on both transports: a bus starts only once it has read the agent
registry, and messages to agents discovery does not know are refused at once.

The Kafka variants run on the real broker; "another process" is a second bus on
the same broker (or, in memory, on the same transport), which shares nothing with
the first but the topics.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.discovery.announcer import Announcer, card_event
from a2a_bus.discovery.directory import Directory
from a2a_bus.gateway.ingress import Ingress
from a2a_bus.protocol import Adaptor, new_event
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.dead_letters import DLQ_REASON
from a2a_bus.transport.kafka import KafkaTransport
from a2a_bus.transport.memory import MemoryTransport
from tests.agents import Calc
from tests.buses import eventually

pytestmark = pytest.mark.timeout(180)

WAIT = 30.0  # upper bound on any single await; never a performance assertion
AGENT_NOT_FOUND = -32002


class Later(Agent):
    """An agent that is sent to before it ever ran (the opt-out)."""

    agent_id = "later"
    notes: list[str] = []
    noted = threading.Event()

    @method
    def note(self, text: str) -> None:
        Later.notes.append(text)
        Later.noted.set()


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def make_bus(request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Awaitable[Bus]]]:
    """A factory of started buses sharing one prefix (and, in memory, one transport)."""
    kind = request.param
    bootstrap = request.getfixturevalue("kafka_bootstrap") if kind == "kafka" else None
    prefix = f"t{uuid.uuid4().hex[:10]}"
    buses: list[Bus] = []

    async def make(*agents: type[Agent], **options: Any) -> Bus:
        options.setdefault("prefix", prefix)
        options.setdefault("heartbeat", 60.0)
        options.setdefault("request_timeout", WAIT)
        if kind == "memory":
            bus = Bus(buses[0].transport, **options) if buses else Bus.memory(**options)
        else:
            bus = Bus.kafka(bootstrap, bus_options=options, metadata_max_age_ms=1000)
        for agent in agents:
            bus.spawn(agent)
        await asyncio.wait_for(bus.astart(), WAIT)
        buses.append(bus)
        return bus

    yield make
    for bus in reversed(buses):
        await asyncio.wait_for(bus.astop(), WAIT)


def is_kafka(bus: Bus) -> bool:
    return type(bus.transport).__name__ == "KafkaTransport"


async def dead_letters(bus: Bus, count: int) -> list[Delivery]:
    """The first ``count`` records of the bus's dead-letter topic."""
    letters: list[Delivery] = []
    arrived = asyncio.Event()

    async def on_letter(delivery: Delivery) -> None:
        letters.append(delivery)
        arrived.set()

    group = f"{bus.topics.dlq}.reader.{uuid.uuid4().hex[:6]}"
    subscription = await bus.transport.subscribe(
        [bus.topics.dlq], group, on_letter, from_beginning=True
    )
    try:
        async with asyncio.timeout(WAIT):
            while len(letters) < count:
                arrived.clear()
                await arrived.wait()
    finally:
        await subscription.stop()
    return letters


def reason(delivery: Delivery) -> str:
    return dict(delivery.headers)[DLQ_REASON].decode()


# -- item 1: the registry is read before the bus starts --------------------------------


async def test_a_fresh_bus_routes_its_first_request_by_method(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    await make_bus(Calc)  # the agent runs on another bus
    fresh = await make_bus()
    client = fresh.async_client()
    # No waiting, no retry: the first request already finds the method's owner.
    assert await client.request(None, "subtract", [42, 23]) == 19
    assert [m["agent"] for m in fresh.directory.methods()].count("calc") == len(
        Calc.card()["methods"]
    )


async def test_a_record_that_is_no_card_at_the_registry_end_counts_as_read(
    make_bus: Callable[..., Awaitable[Bus]], caplog: pytest.LogCaptureFixture
) -> None:
    first = await make_bus(Calc)
    await first.transport.publish_raw(first.topics.registry, b"{not a card", key=b"junk")
    with caplog.at_level(logging.WARNING, logger="a2a_bus.discovery.directory"):
        fresh = await make_bus(registry_timeout=WAIT)
    assert "agent registry" not in caplog.text
    assert await fresh.async_client().request(None, "subtract", [5, 3]) == 2


@pytest.mark.kafka
async def test_a_registry_not_read_in_time_starts_the_bus_with_a_warning(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    options = {"prefix": prefix, "registry_timeout": 0.0}
    bus = Bus.kafka(kafka_bootstrap, bus_options=options, metadata_max_age_ms=1000)
    with caplog.at_level(logging.WARNING, logger="a2a_bus.discovery.directory"):
        await asyncio.wait_for(bus.astart(), WAIT)
    try:
        assert bus.running
        assert f"agent registry '{prefix}.registry'" in caplog.text
        assert "starting anyway" in caplog.text
    finally:
        await asyncio.wait_for(bus.astop(), WAIT)


# -- item 2: unknown agents ------------------------------------------------------------


async def test_a_request_to_an_unknown_agent_is_answered_at_once(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Calc)
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as caught:
        await client.request("nobody", "echo", {})
    assert (caught.value.code, caught.value.message, caught.value.data) == (
        AGENT_NOT_FOUND,
        "Agent not found",
        "nobody",
    )
    # The raw JSON-RPC path answers the same error object with the caller's id.
    message = {"jsonrpc": "2.0", "id": 7, "method": "echo", "params": {"_agentId": "nobody"}}
    response = await client.call(message)
    assert response == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": AGENT_NOT_FOUND, "message": "Agent not found", "data": "nobody"},
    }
    with pytest.raises(JsonRpcError) as streamed:
        async for _ in client.stream("nobody", "count", {"n": 2}):
            pass
    assert (streamed.value.code, streamed.value.data) == (AGENT_NOT_FOUND, "nobody")
    assert await client.request("calc", "subtract", [2, 1]) == 1  # known: still served


async def test_notifications_and_events_to_an_unknown_agent_are_refused(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Calc)
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as notified:
        await client.notify("nobody", "echo", {"value": 1})
    assert (notified.value.code, notified.value.data) == (AGENT_NOT_FOUND, "nobody")
    event = new_event({"type": "x.ping", "source": "test", "targetagent": "ghost"}, {"n": 1})
    with pytest.raises(JsonRpcError) as published:
        await client.publish_event(event)
    assert (published.value.code, published.value.data) == (AGENT_NOT_FOUND, "ghost")
    with pytest.raises(JsonRpcError) as chunked:
        await client.stream_to("nobody", "collect", [1, 2])
    assert chunked.value.code == AGENT_NOT_FOUND
    # A subject nobody subscribes to is still fine: the topic retains the event.
    assert await client.publish("orders.created", {"n": 1})
    if is_kafka(bus):  # nothing was written for the unknown names: no topics made
        topics = set(await bus.transport.list_topics())  # type: ignore[attr-defined]
        assert {bus.topics.agent("nobody"), bus.topics.agent("ghost")}.isdisjoint(topics)
        assert bus.topics.subject("orders.created") in topics


async def test_a_card_naming_this_process_changes_none_of_its_own_agents(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Calc)
    now = time.time()
    # Another producer's cards that claim to come from this process.
    for card in (
        {"id": "calc", "node": bus.node, "methods": [], "heartbeatAt": now},
        {"id": "aaa", "node": bus.node, "methods": [{"name": "subtract"}], "heartbeatAt": now},
    ):
        event = card_event(bus.adaptor, card)
        await bus.transport.publish(bus.topics.registry, event, key=card["id"].encode())
    await eventually(lambda: bus.directory.card("aaa"), "the card of aaa")
    assert not bus.directory.hosts("aaa")
    assert not bus.directory.lacks("calc", "subtract")  # its own card says what it has
    assert bus.directory.method_owner("subtract") == "calc"  # local agents first
    assert await bus.async_client().request(None, "subtract", [5, 3]) == 2


async def test_an_agent_of_another_bus_is_known(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    await make_bus(Calc)
    fresh = await make_bus()
    assert await fresh.async_client().request("calc", "subtract", [10, 4]) == 6


async def test_the_opt_out_lets_messages_wait_for_an_agent_that_never_ran(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    Later.notes.clear()
    Later.noted.clear()
    bus = await make_bus(require_known_agents=False)
    await bus.async_client().notify("later", "note", {"text": "sent before it ran"})
    await bus.aspawn(Later)
    assert await asyncio.to_thread(Later.noted.wait, WAIT)
    assert Later.notes == ["sent before it ran"]


async def test_the_ingress_answers_and_dead_letters_messages_to_unknown_agents(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Calc)
    answers: list[dict[str, Any]] = []
    answered = asyncio.Event()

    async def on_answer(delivery: Delivery) -> None:
        answers.append(delivery.event.get_data())
        answered.set()

    topics = bus.topics
    await bus.transport.subscribe(
        [topics.ingress_reply], f"{topics.ingress_reply}.test", on_answer, from_beginning=True
    )
    async with Ingress(bus.service):
        notification = {"jsonrpc": "2.0", "method": "echo", "params": {"_agentId": "nobody"}}
        request = {**notification, "id": "r1", "params": {"_agentId": "ghost"}}
        await bus.transport.publish_raw(topics.ingress, orjson.dumps(notification))
        await bus.transport.publish_raw(topics.ingress, orjson.dumps(request))
        letters = await dead_letters(bus, 2)
        async with asyncio.timeout(WAIT):
            while not answers:
                answered.clear()
                await answered.wait()
    reasons = sorted(reason(letter) for letter in letters)
    assert reasons == [
        "unroutable: Agent not found: ghost",
        "unroutable: Agent not found: nobody",
    ]
    assert answers == [
        {
            "jsonrpc": "2.0",
            "id": "r1",
            "error": {"code": AGENT_NOT_FOUND, "message": "Agent not found", "data": "ghost"},
        }
    ]


def test_the_opt_out_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("A2A_REQUIRE_KNOWN_AGENTS", "0")
    assert Bus.memory().dispatcher.require_known_agents is False
    assert Bus.memory(require_known_agents=True).dispatcher.require_known_agents is True
    monkeypatch.setenv("A2A_REQUIRE_KNOWN_AGENTS", "true")
    assert Bus.memory().dispatcher.require_known_agents is True
    monkeypatch.delenv("A2A_REQUIRE_KNOWN_AGENTS")
    assert Bus.memory().dispatcher.require_known_agents is True
    monkeypatch.setenv("A2A_REQUIRE_KNOWN_AGENTS", "maybe")
    with pytest.raises(
        ValueError, match="A2A_REQUIRE_KNOWN_AGENTS='maybe': expected true or false"
    ):
        Bus.memory()


# -- the heartbeat ---------------------------------------------------------------------


def echo_agents(count: int) -> list[type[Agent]]:
    """``count`` distinct agents (``beat-<n>``)."""

    def echo(self: Agent, value: Any) -> Any:
        return value

    return [
        type(f"Beat{n}", (Agent,), {"agent_id": f"beat-{n}", "echo": method(echo)})
        for n in range(count)
    ]


async def test_one_beat_renews_the_card_of_every_agent(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    agents = echo_agents(20)
    host = await make_bus(*agents)  # heartbeat 60 s: only the beat below renews
    watcher = await make_bus()
    ids = [agent.agent_id for agent in agents]
    started = {agent_id: beat_of(watcher, agent_id) for agent_id in ids}
    await asyncio.sleep(0.01)  # a later heartbeatAt than the start's cards
    await asyncio.wait_for(host.announcer.beat(), WAIT)
    async with asyncio.timeout(WAIT):
        while any(beat_of(watcher, agent_id) <= started[agent_id] for agent_id in ids):
            await asyncio.sleep(0.02)


def beat_of(bus: Bus, agent_id: str) -> float:
    """The ``heartbeatAt`` of the card ``bus`` has of ``agent_id``."""
    card = bus.directory.card(agent_id)
    assert card is not None, f"{agent_id} unknown"
    return float(card["heartbeatAt"])


@pytest.mark.parametrize("kind", ["memory", "kafka"])
async def test_a_beat_that_cannot_publish_says_so_once(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Not started: on Kafka the publish fails at once, in memory when awaited.
    transport = MemoryTransport() if kind == "memory" else KafkaTransport("127.0.0.1:1")
    cards = [{"id": f"beat-{n}", "methods": [], "heartbeatAt": 0} for n in range(5)]
    announcer = Announcer(transport, "a2a.registry", Adaptor(), 60.0, lambda: cards)
    with caplog.at_level(logging.WARNING, logger="a2a_bus.discovery.directory"):
        await asyncio.wait_for(announcer.beat(), WAIT)
    [record] = caplog.records
    assert "5 of 5 cards not published (beat-0 first)" in record.getMessage()
    assert "not started" in record.getMessage()


async def test_a_card_other_buses_would_not_take_is_not_published(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = MemoryTransport()
    await transport.start()
    try:
        good = {"id": "good", "methods": [], "heartbeatAt": 0}
        bad = {"id": "bad", "methods": "work", "heartbeatAt": 0}
        announcer = Announcer(transport, "a2a.registry", Adaptor(), 60.0, lambda: [bad, good])
        with caplog.at_level(logging.WARNING, logger="a2a_bus.discovery.directory"):
            await asyncio.wait_for(announcer.beat(), WAIT)
        [record] = caplog.records
        assert "1 of 2 cards not published (bad first)" in record.getMessage()
        assert "its methods 'work' are no list" in record.getMessage()
        page = await transport.read("a2a.registry", limit=10)
        assert [event.get_data()["id"] for event in page.events] == ["good"]
    finally:
        await transport.stop()


# -- what counts as known --------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def read(directory: Directory, event: Any, offset: int, key: bytes | None = None) -> str | None:
    """Hand ``directory`` a registry record as its reader does: applied, then counted
    as read; why it is no valid card, else None."""
    try:
        return directory.apply(Delivery(event, "a2a.registry", 0, offset, key))
    finally:
        directory.count_read(0, offset)


async def test_known_covers_starting_local_and_recently_seen_agents() -> None:
    adaptor = Adaptor()
    clock = Clock()
    directory = Directory(adaptor, ttl=15.0, clock=clock)
    assert not directory.known("a")
    directory.expect_local("a")  # spawned here, still starting: known at once
    assert directory.known("a") and directory.card("a") is None
    directory.remove_local("a")  # its start failed
    assert not directory.known("a")

    card = {"id": "b", "methods": [], "heartbeatAt": clock.now}
    read(directory, card_event(adaptor, card), 0)
    clock.now += 20.0  # expired a moment ago (no heartbeat for more than the TTL)
    assert directory.card("b") is None and directory.known("b")
    clock.now += 11.0  # more than two TTLs since the last heartbeat: gone for good
    assert not directory.known("b")

    card = {"id": "c", "methods": [], "heartbeatAt": clock.now}
    read(directory, card_event(adaptor, card), 1)
    # One replica says goodbye while others may still run: known a while longer.
    read(directory, card_event(adaptor, card, gone=True), 2)
    assert directory.card("c") is None and directory.known("c")
    clock.now += 31.0
    assert not directory.known("c")


async def test_reach_waits_for_the_registry_offsets() -> None:
    adaptor = Adaptor()
    directory = Directory(adaptor, ttl=15.0)
    await asyncio.wait_for(directory.reach({}), WAIT)  # an empty registry: ready
    waiting = asyncio.ensure_future(directory.reach({0: 2, 1: 0}))
    card = {"id": "a", "methods": [], "heartbeatAt": 0}
    read(directory, card_event(adaptor, card), 0)
    await asyncio.sleep(0)
    assert not waiting.done()
    read(directory, card_event(adaptor, card), 1)
    await asyncio.wait_for(waiting, WAIT)


def a_card(agent_id: str, *methods: str, seen: float, **fields: Any) -> Any:
    """The registry record of a card of ``agent_id`` last seen at ``seen``."""
    card = {"id": agent_id, "methods": [{"name": m} for m in methods], "heartbeatAt": seen}
    return card_event(Adaptor(), {**card, **fields})


async def test_a_card_of_the_wrong_shape_is_not_applied() -> None:
    clock = Clock()
    directory = Directory(Adaptor(), ttl=15.0, clock=clock)
    assert read(directory, a_card("good", "work", seen=clock.now), 0) is None
    bad = [
        a_card("aaa", seen=clock.now, methods="work"),
        a_card("aab", seen=clock.now, methods=[{"name": 7}]),
        a_card("a b", "work", seen=clock.now),
        a_card("aac", "work", seen=clock.now, subscriptions=5),
    ]
    for offset, event in enumerate(bad, 1):
        assert read(directory, event, offset) is not None
    assert read(directory, a_card("aad", "work", seen=clock.now), 5, key=b"good") is not None
    # The views read only the good card, and the start's count went on.
    assert [card["id"] for card in directory.cards()] == ["good"]
    assert directory.method_owner("work") == "good"
    assert [entry["agent"] for entry in directory.methods()] == ["good"]
    assert not directory.lacks("good", "work") and not directory.known("aaa")
    await asyncio.wait_for(directory.reach({0: 6}), WAIT)


async def test_a_renewed_card_is_checked_again_where_it_changed() -> None:
    """A heartbeat's card, the same but for ``heartbeatAt``, skips the full check; a
    changed field, or a heartbeat that is no moment, is checked and refused."""
    clock = Clock()
    directory = Directory(Adaptor(), ttl=15.0, clock=clock)
    assert read(directory, a_card("good", "work", seen=clock.now), 0) is None
    clock.now += 5.0
    assert read(directory, a_card("good", "work", seen=clock.now), 1) is None
    assert directory.card("good") is not None
    assert directory.card("good")["heartbeatAt"] == clock.now  # type: ignore[index]
    assert read(directory, a_card("good", seen=clock.now, methods="work"), 2) is not None
    assert read(directory, a_card("good", "work", seen=math.nan), 3) is not None
    assert read(directory, a_card("good", "work", seen=clock.now, subscriptions=5), 4) is not None
    assert directory.method_owner("work") == "good"  # the last good card holds


async def test_a_card_from_the_future_expires_like_any_other() -> None:
    clock = Clock()
    directory = Directory(Adaptor(), ttl=15.0, clock=clock)
    read(directory, a_card("ahead", seen=clock.now + 1e9), 0)
    card = directory.card("ahead")
    assert card is not None and card["heartbeatAt"] == clock.now  # seen now, not later
    clock.now += 16.0
    assert directory.card("ahead") is None and directory.known("ahead")
    clock.now += 15.0
    assert not directory.known("ahead")


async def test_routing_by_method_follows_the_cards_as_they_change() -> None:
    clock = Clock()
    directory = Directory(Adaptor(), ttl=15.0, clock=clock)
    read(directory, a_card("b", "work", "rest", seen=clock.now), 0)
    read(directory, a_card("a", "work", seen=clock.now - 10.0), 1)
    assert directory.method_owner("work") == "a"  # the first by id
    clock.now += 6.0  # a's card expired: b's is still live
    assert directory.method_owner("work") == "b"
    read(directory, a_card("b", "rest", seen=clock.now), 2)  # b no longer declares it
    assert directory.method_owner("work") is None and directory.lacks("b", "work")
    read(directory, card_event(Adaptor(), {"id": "b"}, gone=True), 3)
    assert directory.method_owner("rest") is None and directory.cards() == []


async def test_the_directory_holds_a_bounded_number_of_agents(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    directory = Directory(Adaptor(), ttl=15.0, clock=clock)
    directory.max_agents = 3
    read(directory, a_card("old", seen=clock.now - 31.0), 0)  # long gone: takes no room
    with caplog.at_level(logging.WARNING, logger="a2a_bus.discovery.directory"):
        for n in range(1, 101):  # a flood of distinct agent ids
            read(directory, a_card(f"flood-{n:03}", "work", seen=clock.now), n)
    assert [card["id"] for card in directory.cards()] == ["flood-001", "flood-002", "flood-003"]
    [warning] = caplog.records  # one line, not one per card
    assert "the card of 'flood-004' is skipped" in warning.getMessage()
    read(directory, a_card("flood-002", "work", seen=clock.now + 1.0), 101)  # renewed: held
    assert directory.card("flood-002") is not None and not directory.known("old")
    clock.now += 31.0  # the flood was not renewed: forgotten, and room is made
    read(directory, a_card("late", "work", seen=clock.now), 102)
    assert [card["id"] for card in directory.cards()] == ["late"]
    assert not directory.known("flood-001") and directory.method_owner("work") == "late"
