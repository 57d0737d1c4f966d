"""One behavioural suite for the bus, run on both transports so they cannot drift.

``memory`` always runs; ``kafka`` needs a broker (the ``kafka_bootstrap``
fixture) and is marked ``kafka``.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from a2a_bus import Bus, Call, JsonRpcError
from a2a_bus.discovery.announcer import card_event
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.dead_letters import DLQ_REASON
from tests.agents import (
    RECORDER,
    Calc,
    Echo,
    Flaky,
    Gated,
    Phoenix,
    Quitter,
    Slow,
    Ticker,
    subscriber,
)
from tests.buses import (
    WAIT,
    eventually,
    header,
    make_bus,
    read_dlq,
)

__all__ = ["make_bus"]  # the fixture, shared by every test of the module


# -- request/response ------------------------------------------------------------------


async def test_p2p_positional_and_named(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Calc)
    client = bus.async_client()
    assert await client.request("calc", "subtract", [42, 23]) == 19
    assert await client.request("calc", "subtract", {"subtrahend": 23, "minuend": 42}) == 19


async def test_raw_request_on_an_agent_topic_is_answered_raw(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    """Raw JSON-RPC written straight to an agent's topic (no SDK) gets a raw answer on
    the ingress reply topic, keyed by the request's event id."""
    bus = await make_bus(Calc)
    answers: list[Delivery] = []

    async def on_answer(delivery: Delivery) -> None:
        answers.append(delivery)

    reply_topic = bus.topics.ingress_reply
    assert reply_topic == f"{bus.topics.prefix}.ingress.reply"
    group = f"{reply_topic}.reader.{uuid.uuid4().hex[:6]}"
    sub = await bus.transport.subscribe([reply_topic], group, on_answer, from_beginning=True)
    try:
        raw = b'{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": "raw-1"}'
        await bus.transport.publish_raw(bus.topics.agent("calc"), raw)
        await eventually(lambda: len(answers) >= 1)
    finally:
        await sub.stop()
    [answer] = answers
    assert answer.raw
    assert bus.adaptor.to_jsonrpc(answer.event) == {"jsonrpc": "2.0", "result": 19, "id": "raw-1"}


async def test_route_by_method_and_unknown_method(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Calc, Echo)
    client = bus.async_client()
    assert await client.request(None, "subtract", [10, 4]) == 6
    assert await client.request(None, "echo", {"value": "hi"}) == "hi"
    with pytest.raises(JsonRpcError) as by_method:
        await client.request(None, "no/such", {})
    with pytest.raises(JsonRpcError) as p2p:
        await client.request("calc", "no/such", {})
    # The JSON-RPC spec's wording, the method in data, whichever side answers.
    for error in (by_method.value, p2p.value):
        assert (error.code, error.message, error.data) == (-32601, "Method not found", "no/such")
    # A notification no agent declares is refused to its sender too, nothing written
    # (it was dead-lettered, and the sender could not tell).
    with pytest.raises(JsonRpcError) as notified:
        await client.notify(None, "no/such", {})
    assert (notified.value.code, notified.value.data) == (-32601, "no/such")
    assert bus.transport.dead_lettered == 0


@pytest.mark.parametrize(
    "params",
    [[1], [1, 2, 3], {"minuend": 1}, {"minuend": 1, "subtrahend": 2, "x": 3}, ["a", 1]],
)
async def test_bad_params(make_bus: Callable[..., Awaitable[Bus]], params: Any) -> None:
    bus = await make_bus(Calc)
    with pytest.raises(JsonRpcError) as error:
        await bus.async_client().request("calc", "subtract", params)
    assert error.value.code == -32602


async def test_custom_error(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Calc)
    with pytest.raises(JsonRpcError) as error:
        await bus.async_client().request("calc", "divide", [1, 0])
    assert (error.value.code, error.value.message, error.value.data) == (
        -32010,
        "division by zero",
        {"a": 1},
    )


async def test_internal_error_has_no_traceback(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Calc)
    response = await bus.async_client().call(
        {"jsonrpc": "2.0", "method": "explode", "params": {"_agentId": "calc"}, "id": "x1"}
    )
    assert response == {
        "jsonrpc": "2.0",
        "error": {"code": -32603, "message": "Internal error"},
        "id": "x1",
    }
    # The agent still serves after its restarts.
    assert await bus.async_client().request("calc", "subtract", [3, 1]) == 2


async def test_callers_reusing_one_jsonrpc_id(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus((Echo, 2))
    client = bus.async_client()

    def message(value: str) -> dict[str, Any]:
        params = {"_agentId": "echo", "value": value, "delay": 0.01}
        return {"jsonrpc": "2.0", "method": "echo", "params": params, "id": 1}

    values = [f"caller-{i}" for i in range(20)]
    responses = await asyncio.gather(*(client.call(message(v)) for v in values))
    assert [r.get("result", r) for r in responses] == values
    assert all(r["id"] == 1 for r in responses)


async def test_batch(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Calc)
    client = bus.async_client()
    batch = [
        {"jsonrpc": "2.0", "method": "subtract", "params": [5, 1], "id": "a"},
        {"jsonrpc": "2.0", "method": "subtract", "params": {"_agentId": "calc"}},  # notification
        {"jsonrpc": "2.0", "method": 7, "id": "bad"},
        {"jsonrpc": "2.0", "method": "divide", "params": [1, 0], "id": "c"},
    ]
    responses = await client.call(batch)
    assert isinstance(responses, list)
    by_id = {r["id"]: r for r in responses}
    assert by_id["a"]["result"] == 4
    assert by_id["c"]["error"]["code"] == -32010
    assert next(r for r in responses if r["id"] not in ("a", "c"))["error"]["code"] == -32600
    assert len(responses) == 3


async def test_a_refused_notification_does_not_sink_its_batch(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Calc)
    batch = [
        {"jsonrpc": "2.0", "method": "subtract", "params": [5, 3], "id": 1},
        {"jsonrpc": "2.0", "method": "no.such.method", "params": {}},  # refused, not sent
    ]
    responses = await asyncio.wait_for(bus.async_client().call(batch), WAIT)
    assert responses == [{"jsonrpc": "2.0", "result": 2, "id": 1}]
    # Alone, the same notification is refused to its sender.
    with pytest.raises(JsonRpcError) as refused:
        await asyncio.wait_for(bus.async_client().call(batch[1]), WAIT)
    assert refused.value.code == -32601


# -- deadlines -------------------------------------------------------------------------


async def test_deadline_and_late_reply_counted(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Echo)
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as error:
        await client.request("echo", "echo", {"value": "late", "delay": 0.5}, timeout=0.05)
    assert error.value.code == -32001
    await eventually(lambda: bus.metrics.late_replies == 1)
    assert bus.metrics.duplicate_replies == 0
    # The late answer reached no one; the next call gets its own answer.
    assert await client.request("echo", "echo", {"value": "next"}) == "next"


# -- pub/sub ---------------------------------------------------------------------------


async def test_fan_out_one_publish_three_subscribers(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    tag = uuid.uuid4().hex[:6]
    names = [f"fan-{tag}-{i}" for i in range(3)]
    bus = await make_bus(*(subscriber(n, "alerts.fire") for n in names))
    topic = bus.topics.subject("alerts.fire")
    writes_before = _writes(bus, topic)
    await bus.async_client().publish("alerts.fire", {"n": 1}, partitionkey="k")
    assert _writes(bus, topic) - writes_before == 1
    # A second event on the same key arrives after the first: when every
    # subscriber has it, none can still receive a copy of the first.
    await bus.async_client().publish("alerts.fire", {"n": 2}, partitionkey="k")
    await eventually(lambda: all(len(RECORDER.get(n)) >= 2 for n in names))
    assert all(RECORDER.get(n) == [{"n": 1}, {"n": 2}] for n in names)
    # An invalid subject is refused at once, not dead-lettered behind the caller's back.
    with pytest.raises(JsonRpcError) as error:
        await bus.async_client().publish("bad subject!", {"n": 3})
    assert error.value.code == -32600
    assert bus.metrics.dead_letters == 0


def _writes(bus: Bus, topic: str) -> int:
    transport: Any = bus.transport
    if hasattr(transport, "writes"):
        return int(transport.writes.get(topic, 0))
    return int(transport.metrics.produced)


async def test_wildcard_subscription(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    tag = uuid.uuid4().hex[:6]
    one, many = f"one-{tag}", f"many-{tag}"
    bus = await make_bus(subscriber(one, "orders.*"), subscriber(many, "orders.#"))
    client = bus.async_client()
    for subject in ("orders.eu", "orders.us", "orders.eu.paris"):
        await client.publish(subject, {"subject": subject})
    await eventually(lambda: len(RECORDER.get(many)) == 3 and len(RECORDER.get(one)) >= 2)
    assert sorted(d["subject"] for d in RECORDER.get(one)) == ["orders.eu", "orders.us"]


async def test_late_subscriber_replays_history(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    tag = uuid.uuid4().hex[:6]
    bus = await make_bus()
    client = bus.async_client()
    for n in range(5):
        await client.publish("news.sports", {"n": n}, partitionkey="news")
    replayer, live = f"replay-{tag}", f"live-{tag}"
    await bus.aspawn(subscriber(replayer, "news.sports", replay=True))
    await bus.aspawn(subscriber(live, "news.sports"))
    await client.publish("news.sports", {"n": 5}, partitionkey="news")
    await eventually(lambda: len(RECORDER.get(replayer)) == 6 and len(RECORDER.get(live)) >= 1)
    assert [d["n"] for d in RECORDER.get(replayer)] == list(range(6))
    assert RECORDER.get(live) == [{"n": 5}]


async def test_late_wildcard_subscriber_starts_now_unless_it_replays(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    # On Kafka a pattern subscription resets to "earliest" (so topics created
    # later are read whole): for topics that existed, a new group must still
    # start at their end, even when records were fetched before the seek.
    tag = uuid.uuid4().hex[:6]
    bus = await make_bus()
    client = bus.async_client()
    for n in range(5):
        await client.publish(f"feed{tag}.a", {"n": n}, partitionkey=str(n))
    replayer, live = f"replay-{tag}", f"live-{tag}"
    await bus.aspawn(subscriber(replayer, f"feed{tag}.*", replay=True))
    await bus.aspawn(subscriber(live, f"feed{tag}.*"))
    await client.publish(f"feed{tag}.a", {"n": 5})
    await eventually(lambda: len(RECORDER.get(replayer)) == 6 and len(RECORDER.get(live)) >= 1)
    assert sorted(d["n"] for d in RECORDER.get(replayer)) == list(range(6))
    assert RECORDER.get(live) == [{"n": 5}]


# -- streaming -------------------------------------------------------------------------


async def test_stream_1000_chunks_agent_to_caller(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Calc)
    items = [item async for item in bus.async_client().stream("calc", "count", [1000])]
    assert items == list(range(1000))
    assert bus.metrics.stream_duplicates == 0


async def test_stream_1000_chunks_caller_to_agent(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Calc)
    result = await bus.async_client().stream_to("calc", "collect", range(1000), {"scale": 2})
    assert result == [2 * n for n in range(1000)]


@pytest.mark.parametrize(
    ("chunks", "params", "said"),
    [
        ("123", None, "not a str, which would go one character or byte per chunk"),
        (b"12", None, "not a bytes, which would go one character or byte per chunk"),
        ({"n": 1}, None, "not a dict, which would go one key per chunk"),
        (5, None, "chunks must be an iterable of the chunks to send .* not 5"),
        (None, None, "chunks must be an iterable of the chunks to send .* not None"),
        ([1, 2], [2], "params must be a dict of the handler's other named params, not \\[2\\]"),
    ],
)
async def test_stream_to_refuses_what_is_no_stream_of_chunks(
    make_bus: Callable[..., Awaitable[Bus]], chunks: Any, params: Any, said: str
) -> None:
    """A string used to go one character per chunk (bytes as numbers: ``b"12"``
    reached the handler as 49 and 50), a dict one key per chunk; the sync client
    and the async one refuse them before anything is sent."""
    bus = await make_bus(Calc)
    with pytest.raises(TypeError, match=f"stream_to: .*{said}"):
        await bus.async_client().stream_to("calc", "collect", chunks, params)
    with pytest.raises(TypeError, match=f"stream_to: .*{said}"):
        await asyncio.to_thread(bus.client().stream_to, "calc", "collect", chunks, params)
    assert await bus.async_client().stream_to("calc", "collect", [1]) == [1]


async def test_a_batch_of_what_is_no_call_is_refused(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    """Plain tuples used to fail with ``AttributeError: 'tuple' object has no
    attribute 'agent'``."""
    bus = await make_bus(Calc)
    client = bus.async_client()
    with pytest.raises(TypeError, match=r"\('calc', 'subtract', \[2, 1\]\) is no Call"):
        await client.batch([("calc", "subtract", [2, 1])])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"batch takes a list of Call.*: pass \[call\]"):
        await client.batch(Call("calc", "subtract", [2, 1]))  # type: ignore[arg-type]
    assert await client.batch([Call("calc", "subtract", [2, 1])]) == [1]


async def test_stream_errors_surface(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Calc)
    with pytest.raises(JsonRpcError) as error:
        async for _ in bus.async_client().stream("calc", "count", ["many"]):
            pass
    assert error.value.code == -32602


async def test_closing_a_stream_stops_the_agents_generator(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Ticker)
    limit = 100_000  # bounded: without a cancel the generator runs to the end
    # A caller on another node: the cancel travels through the transport.
    caller = await make_bus(peer=bus)
    stream = caller.async_client().stream("ticker", "tick", [limit])
    assert [await asyncio.wait_for(anext(stream), WAIT) for _ in range(3)] == [0, 1, 2]
    await asyncio.wait_for(stream.aclose(), WAIT)
    await eventually(Ticker.done.is_set)
    assert Ticker.closed_early.is_set()
    assert Ticker.produced < limit
    await eventually(lambda: not bus.dispatcher.running_streams)

    def read_three_then_break() -> list[int]:  # the sync client of the agent's node
        seen = []
        for item in bus.client().stream("ticker", "tick", [limit]):
            seen.append(item)
            if len(seen) == 3:
                break
        return seen

    assert await asyncio.wait_for(asyncio.to_thread(read_three_then_break), WAIT) == [0, 1, 2]
    await eventually(Ticker.done.is_set)
    assert Ticker.closed_early.is_set()
    assert Ticker.produced < limit


# -- supervision -----------------------------------------------------------------------


async def test_poison_messages_go_to_dlq_and_agent_keeps_serving(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Flaky)
    client = bus.async_client()
    outcomes = [await _settle(client.request("flaky", "work", [n])) for n in range(1, 31)]
    for n, outcome in zip(range(1, 31), outcomes, strict=True):
        if n % 10 == 0:
            assert isinstance(outcome, JsonRpcError) and outcome.code == -32603
        else:
            assert outcome == n * 2
    letters = await read_dlq(bus, 3)
    assert len(letters) == 3
    assert sorted(letter.event.get_data()["params"][0] for letter in letters) == [10, 20, 30]
    for letter in letters:
        assert "handler-crash: ValueError: poison message" in header(letter, DLQ_REASON)
        assert header(letter, "a2a-dlq-agent") == "flaky"
        assert header(letter, "a2a-dlq-attempts") == "3"
    assert bus.metrics.restarts == 9  # 3 poison messages x (1 try + 2 retries)
    assert bus.metrics.dead_letters == 3


@pytest.mark.parametrize("kind", ["exit", "interrupt"])
async def test_a_handler_raising_system_exit_crashes_its_agent_alone(
    make_bus: Callable[..., Awaitable[Bus]], kind: str
) -> None:
    """pykka stops every actor in the process on a BaseException that is no
    Exception: the agent's crash it must be, dead-lettered, the others serving."""
    bus = await make_bus(Quitter, Calc)
    other = await make_bus(Echo, prefix=f"other{uuid.uuid4().hex[:8]}")
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as crashed:
        await client.request("quitter", "quit", [kind])
    assert crashed.value.code == -32603
    assert await client.request("calc", "subtract", [3, 1]) == 2
    assert await other.async_client().request("echo", "echo", ["still here"]) == "still here"
    [letter] = await read_dlq(bus, 1)
    escaped = "SystemExit" if kind == "exit" else "KeyboardInterrupt"
    assert f"handler-crash: {escaped}: bye" in header(letter, DLQ_REASON)


async def _settle(awaitable: Awaitable[Any]) -> Any:
    try:
        return await awaitable
    except JsonRpcError as exc:
        return exc


async def test_crashed_agent_is_restarted_and_message_retried(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Phoenix)
    first_instance = Phoenix.instances
    result = await bus.async_client().request("phoenix", "once", [uuid.uuid4().hex])
    assert result == {"instance": first_instance + 1, "redelivered": True}
    assert bus.metrics.restarts == 1
    assert bus.metrics.redeliveries == 1
    assert bus.metrics.dead_letters == 0


# -- backpressure and shutdown ---------------------------------------------------------


async def test_backpressure_bounds_the_mailbox(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Slow)
    client = bus.async_client()
    results = await asyncio.gather(
        *(client.request("slow", "nap", {"seconds": 0.005, "tag": i}) for i in range(40))
    )
    assert sorted(results) == list(range(40))
    assert bus.metrics.peak_mailbox == Slow.mailbox_size
    assert bus.metrics.pauses >= 1


async def test_graceful_shutdown_drains_in_flight(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    # The handler holds every call until the gate opens, so all eight are in flight
    # however the requests travel (a write retried by the producer arrives late).
    Gated.gate = threading.Event()
    bus = await make_bus((Gated, 1))
    client = bus.async_client()
    calls = [asyncio.ensure_future(client.request("gated", "hold", {"value": i})) for i in range(8)]
    host = bus.hosts[0]
    await eventually(lambda: host.replicas[0].held == 8)
    stopping = asyncio.ensure_future(bus.astop())
    await asyncio.sleep(0.2)
    assert not stopping.done()  # the stop waits for the calls in flight
    Gated.gate.set()
    await asyncio.wait_for(stopping, WAIT)
    assert [call.result() for call in calls] == list(range(8))
    assert bus.metrics.in_flight == 0


# -- discovery -------------------------------------------------------------------------


async def test_methods_list_and_card(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    bus = await make_bus(Calc, subscriber(f"cards-{uuid.uuid4().hex[:6]}", "orders.*"))
    client = bus.async_client()
    methods = (await client.request(None, "methods/list"))["methods"]
    subtract = next(m for m in methods if m["agent"] == "calc" and m["name"] == "subtract")
    assert subtract["params"]["properties"] == {
        "minuend": {"type": "integer"},
        "subtrahend": {"type": "integer"},
    }
    assert subtract["result"] == {"type": "integer"}
    card = await client.request(None, "agent/card/get", {"agentId": "calc"})
    assert card["id"] == "calc"
    assert {m["name"] for m in card["methods"]} == {
        "subtract",
        "divide",
        "explode",
        "count",
        "collect",
    }
    assert next(m for m in card["methods"] if m["name"] == "count")["streaming"] == "response"
    with pytest.raises(JsonRpcError) as error:
        await client.request(None, "agent/card/get", {"agentId": "nobody"})
    assert error.value.code == -32002


async def test_cards_from_other_processes_expire(make_bus: Callable[..., Awaitable[Bus]]) -> None:
    # Long enough for the card to be read while alive on a loaded machine (the record
    # travels through the broker), short enough to watch it expire.
    bus = await make_bus(card_ttl=2.0)
    client = bus.async_client()
    ghost = {
        "id": "ghost",
        "description": "an agent in a process that died",
        "version": "1",
        "methods": [{"name": "haunt", "params": {}, "result": {}}],
        "subscriptions": [],
        "heartbeatAt": time.time(),
    }
    # What another process's bus writes on the registry, with no later heartbeat.
    await bus.transport.publish(bus.topics.registry, card_event(bus.adaptor, ghost), key=b"ghost")
    await eventually(lambda: bus.directory.card("ghost") is not None)
    assert (await client.request(None, "agent/card/get", ["ghost"]))["id"] == "ghost"
    await eventually(lambda: bus.directory.card("ghost") is None)
    with pytest.raises(JsonRpcError) as error:
        await client.request(None, "agent/card/get", ["ghost"])
    assert error.value.code == -32002
    methods = (await client.request(None, "methods/list"))["methods"]
    assert all(m["agent"] != "ghost" for m in methods)
