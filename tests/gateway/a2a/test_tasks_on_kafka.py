"""A2A tasks survive any one process: the stock ``a2a-sdk`` client against two
gateway processes and agent processes on a real broker (``a2a-bus serve``, each a
real OS process; see :mod:`.processes`).

A task's records are on the bus (``<prefix>.tasks``) and every gateway folds
them: a gateway killed mid-stream loses nothing (the other serves the rest, also
from ``Last-Event-ID``), a restarted gateway reads its tasks back, a cancel from
any replica stops the handler wherever it runs, a killed agent replica's task is
taken over (or fails with its reason, never stuck), a repeated send runs once,
and a task waiting for input continues on any replica.

The agents (:mod:`.task_agents`) log every step to a shared file, so each test
counts what was lost, repeated or run again; the counts are printed (``-s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import orjson
import pytest
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import (
    get_artifact_text,
    get_data_parts,
    get_message_text,
    new_data_part,
    new_message,
    new_text_part,
)
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import UnsupportedOperationError

from a2a_bus import Agent, Bus, method
from a2a_bus.gateway import GatewaySettings, create_app
from tests.buses import eventually
from tests.transport.kafka.own_kafka import OwnKafka, running_kafka

from .processes import Cluster

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

T = TypeVar("T")
#: Seconds; a guard against hangs, never a performance limit.
WAIT = 60.0
#: The agents the shared worker process hosts.
AGENTS = ("streamer", "narrator", "plodder", "booker")
#: The gateways' inactivity limit: longer than a killed agent process's partitions
#: take to move (the session timeout below, then a rebalance), so that another
#: replica takes its task over first.
INACTIVITY = 15.0
SESSION_TIMEOUT_MS = 6_000  # the broker's minimum
WORDS, PAUSE = 50, 0.1
#: Times the same message goes to both gateways at once.
ROUNDS = 5
FULL = "".join(f"w{i} " for i in range(WORDS))


@pytest.fixture(scope="module")
def cluster(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    settings = {
        "A2A_GATEWAY_A2A_TASK_INACTIVITY": str(INACTIVITY),
        "A2A_KAFKA_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
        "A2A_KAFKA_HEARTBEAT_INTERVAL_MS": "500",
    }
    prefix = f"tk{uuid.uuid4().hex[:10]}"
    directory = tmp_path_factory.mktemp("tasks")
    cluster = Cluster(kafka_bootstrap, prefix, directory, uuid.uuid4().hex, settings)
    try:
        cluster.worker("Streamer", "Narrator", "Plodder", "Booker", replicas=2)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def gateways(cluster: Cluster) -> tuple[str, str]:
    """Gateways ``a`` and ``b``, (re)started when an earlier test killed them."""
    return cluster.gateway("a", AGENTS), cluster.gateway("b", AGENTS)


@pytest.fixture
async def http(cluster: Cluster) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {cluster.token}"}
    async with httpx.AsyncClient(timeout=WAIT, headers=headers) as client:
        yield client


# -- helpers ------------------------------------------------------------------------


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, WAIT)


async def collect(stream: AsyncIterator[T], into: list[T] | None = None) -> list[T]:
    out = [] if into is None else into

    async def drain() -> None:
        async for item in stream:
            out.append(item)

    await within(drain())
    return out


async def a2a(http: httpx.AsyncClient, base: str, agent: str, *, streaming: bool = True) -> Client:
    card = await within(A2ACardResolver(http, f"{base}/a2a/{agent}").get_agent_card())
    return ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


def call(method: str, **params: Any) -> pb.Message:
    part = new_data_part({"method": method, "params": params})
    return new_message([part], role=pb.ROLE_USER)


def text(value: str, **ids: str) -> pb.Message:
    return new_message([new_text_part(value)], role=pb.ROLE_USER, **ids)


async def send(client: Client, message: pb.Message, *, at_once: bool = False) -> pb.Task:
    """SendMessage; ``at_once``: answered while the task still runs."""
    configuration = pb.SendMessageConfiguration(return_immediately=at_once)
    request = pb.SendMessageRequest(message=message, configuration=configuration)
    events = await collect(client.send_message(request))
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


async def get(client: Client, task_id: str) -> pb.Task:
    return await within(client.get_task(pb.GetTaskRequest(id=task_id)))


def handled(cluster: Cluster, task_id: str, *events: str) -> list[dict[str, Any]]:
    """What the agents logged for ``task_id`` (of ``events``, or all), in order."""
    lines = [orjson.loads(line) for line in cluster.log.read_bytes().splitlines()]
    return [x for x in lines if x["task"] == task_id and (not events or x["event"] in events)]


def chunk_texts(events: list[pb.StreamResponse]) -> list[str]:
    return [
        get_artifact_text(e.artifact_update.artifact, "")
        for e in events
        if e.HasField("artifact_update")
    ]


def assembled(events: list[pb.StreamResponse]) -> str:
    """The artifact a client rebuilds from a task snapshot and the updates after it."""
    answer = ""
    for event in events:
        if event.HasField("task"):
            answer = "".join(get_artifact_text(a, "") for a in event.task.artifacts)
        elif event.HasField("artifact_update"):
            update = event.artifact_update
            chunk = get_artifact_text(update.artifact, "")
            answer = answer + chunk if update.append else chunk
    return answer


def final_state(events: list[pb.StreamResponse]) -> pb.TaskState:
    return [e.status_update.status.state for e in events if e.HasField("status_update")][-1]


def words_of(answer: str) -> tuple[int, int]:
    """(lost, repeated) words of ``answer`` against the full answer."""
    words = answer.split()
    return len(set(FULL.split()) - set(words)), len(words) - len(set(words))


async def sse(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    into: list[tuple[int, Any]],
    **headers: str,
) -> None:
    """POST a JSON-RPC request, read its Server-Sent Events as (id, result) into
    ``into`` (the gateway writes ``id:`` before the one ``data:`` line of each)."""
    headers = {"Accept": "text/event-stream", **headers}
    async with http.stream("POST", url, content=orjson.dumps(body), headers=headers) as response:
        assert response.status_code == 200
        event_id = -1
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:])
            elif line.startswith("data:"):
                into.append((event_id, orjson.loads(line[5:])["result"]))
                event_id = -1


def raw_texts(frames: list[tuple[int, Any]]) -> list[str]:
    return [
        "".join(p["text"] for p in result["artifactUpdate"]["artifact"]["parts"])
        for _, result in frames
        if "artifactUpdate" in result
    ]


def words_request(method: str, message_id: str) -> dict[str, Any]:
    data = {"method": "words", "params": {"n": WORDS, "pause": PAUSE}}
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"data": data}]}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


# -- a gateway killed mid-stream ---------------------------------------------------------


async def test_a_stream_outlives_the_gateway_that_accepted_it(
    cluster: Cluster, gateways: tuple[str, str], http: httpx.AsyncClient
) -> None:
    a, b = gateways
    on_a = await a2a(http, a, "streamer")
    # Two streams on gateway A: the stock client's, and one read raw for the SSE ids
    # (of another agent: requests of one inbox partition are handled in turn).
    stock: list[pb.StreamResponse] = []
    request = pb.SendMessageRequest(message=call("words", n=WORDS, pause=PAUSE))
    raw: list[tuple[int, Any]] = []
    body = words_request("SendStreamingMessage", uuid.uuid4().hex)
    readers = [
        asyncio.create_task(collect(on_a.send_message(request), stock)),
        asyncio.create_task(within(sse(http, f"{a}/a2a/narrator", body, raw))),
    ]
    await eventually(
        lambda: len(chunk_texts(stock)) >= 5 and len(raw_texts(raw)) >= 5,
        "5 chunks on A",
        timeout=WAIT,
    )
    await asyncio.to_thread(cluster.kill_gateway, "a")
    for reader in readers:
        with contextlib.suppress(Exception):
            await reader
    seen = "".join(chunk_texts(stock))
    assert 0 < len(seen) < len(FULL) and FULL.startswith(seen)

    # Gateway B serves the rest of the stock client's task: the task, then what follows.
    on_b = await a2a(http, b, "streamer")
    task_id = stock[0].task.id
    rest = await collect(on_b.subscribe(pb.SubscribeToTaskRequest(id=task_id)))
    lost, repeated = words_of(assembled(rest))
    print(f"\nkilled gateway mid-stream, resubscribed: lost {lost}, repeated {repeated} words")
    assert rest[0].HasField("task") and rest[0].task.id == task_id
    assert final_state(rest) == pb.TASK_STATE_COMPLETED
    assert assembled(rest) == FULL

    # The raw stream resumes on B after the last update it saw: nothing twice.
    raw_task = raw[0][1]["task"]["id"]
    last = raw[-1][0]
    resume = ClientCallContext(service_parameters={"Last-Event-ID": str(last)})
    narrator = await a2a(http, b, "narrator")
    after = await collect(
        narrator.subscribe(pb.SubscribeToTaskRequest(id=raw_task), context=resume)
    )
    assert not any(e.HasField("task") for e in after)  # only the updates after `last`
    lost, repeated = words_of("".join(raw_texts(raw)) + "".join(chunk_texts(after)))
    print(f"resumed from Last-Event-ID {last}: lost {lost}, repeated {repeated} words")
    assert "".join(raw_texts(raw)) + "".join(chunk_texts(after)) == FULL
    assert final_state(after) == pb.TASK_STATE_COMPLETED
    # Read raw once the task ended: the versions after `last`, each once, in order.
    again: list[tuple[int, Any]] = []
    subscribe = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": raw_task}}
    await within(sse(http, f"{b}/a2a/narrator", subscribe, again, **{"Last-Event-ID": str(last)}))
    assert [i for i, _ in again] == list(range(last + 1, last + 1 + len(again)))
    assert "".join(raw_texts(again)) == "".join(chunk_texts(after))

    # The agent ran each task once, to its end.
    for task in (task_id, raw_task):
        assert [x["event"] for x in handled(cluster, task, "start", "done", "closed")] == [
            "start",
            "done",
        ]


# -- the only gateway restarted ----------------------------------------------------------


async def test_a_restarted_gateway_reads_its_tasks_back(
    cluster: Cluster, gateways: tuple[str, str], http: httpx.AsyncClient
) -> None:
    done = []
    for base in (gateways[0], gateways[1], gateways[0]):
        client = await a2a(http, base, "plodder")
        done.append(await send(client, call("plod", steps=1, pause=0.0)))
    assert {t.status.state for t in done} == {pb.TASK_STATE_COMPLETED}

    client = await a2a(http, gateways[0], "plodder")
    await asyncio.to_thread(cluster.kill_gateway, "a")
    await asyncio.to_thread(cluster.kill_gateway, "b")
    # Asked as soon as it listens (on the port it had): no time to read the log first.
    await asyncio.to_thread(cluster.gateway, "a", ())
    listed = await within(client.list_tasks(pb.ListTasksRequest(page_size=100)))
    assert {t.id for t in done} <= {t.id for t in listed.tasks}
    for task in done:
        found = await get(client, task.id)
        assert found.status.state == pb.TASK_STATE_COMPLETED
        assert get_data_parts(found.artifacts[0].parts) == [1]
        assert get_data_parts(found.history[0].parts) == get_data_parts(task.history[0].parts)


# -- cancel from the other replica ---------------------------------------------------------


async def test_cancel_on_the_other_gateway_stops_the_handler(
    cluster: Cluster, gateways: tuple[str, str], http: httpx.AsyncClient
) -> None:
    a, b = gateways
    # A plain handler: it sees self.cancelled.
    plodder = await a2a(http, a, "plodder")
    task = await send(plodder, call("plod", steps=400, pause=0.05), at_once=True)
    await eventually(lambda: len(handled(cluster, task.id, "step")) >= 3, "3 steps", timeout=WAIT)
    on_b = await a2a(http, b, "plodder")
    canceled = await within(on_b.cancel_task(pb.CancelTaskRequest(id=task.id)))
    ran_at_cancel = len(handled(cluster, task.id, "step"))
    assert canceled.status.state == pb.TASK_STATE_CANCELED
    stop = await eventually(
        lambda: handled(cluster, task.id, "cancelled"), "the handler stops", timeout=WAIT
    )
    steps = len(handled(cluster, task.id, "step"))
    assert stop[0]["i"] == steps < 400
    assert not handled(cluster, task.id, "done")

    # A generator handler: it is closed. The stream on A ends canceled.
    on_a = await a2a(http, a, "streamer")
    stream: list[pb.StreamResponse] = []
    request = pb.SendMessageRequest(message=call("words", n=400, pause=0.05))
    reader = asyncio.create_task(collect(on_a.send_message(request), stream))
    await eventually(lambda: len(chunk_texts(stream)) >= 3, "3 chunks", timeout=WAIT)
    words_task = stream[0].task.id
    canceled = await within(
        (await a2a(http, b, "streamer")).cancel_task(pb.CancelTaskRequest(id=words_task))
    )
    items_at_cancel = len(handled(cluster, words_task, "item"))
    assert canceled.status.state == pb.TASK_STATE_CANCELED
    await within(reader)
    assert final_state(stream) == pb.TASK_STATE_CANCELED
    closed = await eventually(
        lambda: handled(cluster, words_task, "closed"), "the generator closes", timeout=WAIT
    )
    items = len(handled(cluster, words_task, "item"))
    assert closed[0]["i"] + 1 >= items and items < 400
    assert not handled(cluster, words_task, "done")
    assert (await get(plodder, task.id)).status.state == pb.TASK_STATE_CANCELED
    print(
        f"\ncancel on the other gateway: plain handler {steps} steps "
        f"({steps - ran_at_cancel} after the cancel answered), generator {items} items "
        f"({items - items_at_cancel} after)"
    )


# -- an agent replica killed mid-task ------------------------------------------------------


async def test_a_killed_agent_replica_hands_its_task_over(
    cluster: Cluster, gateways: tuple[str, str], http: httpx.AsyncClient
) -> None:
    a, b = gateways
    relays = [await asyncio.to_thread(cluster.worker, "Relay") for _ in range(2)]
    for base in gateways:
        await asyncio.to_thread(cluster.wait_for_agents, base, ("relay",))
    on_a, on_b = await a2a(http, a, "relay"), await a2a(http, b, "relay")
    steps = 20
    task = await send(on_a, call("plod", steps=steps, pause=0.1), at_once=True)
    await eventually(lambda: len(handled(cluster, task.id, "step")) >= 3, "3 steps", timeout=WAIT)
    victim = next(r for r in relays if r.pid == handled(cluster, task.id, "start")[0]["pid"])
    killed_at = time.monotonic()
    await asyncio.to_thread(victim.kill)
    ran_before = len(handled(cluster, task.id, "step"))

    final = await poll_until_settled(on_b, task.id)
    taken_over = time.monotonic() - killed_at
    starts = handled(cluster, task.id, "start")
    assert final.status.state == pb.TASK_STATE_COMPLETED, get_message_text(final.status.message)
    assert dict(final.metadata) == {"redelivered": True}
    assert get_data_parts(final.artifacts[0].parts) == [steps]
    assert [(x["pid"] == victim.pid, x["redelivered"]) for x in starts] == [
        (True, False),
        (False, True),
    ]
    print(
        f"\nagent replica killed after {ran_before} of {steps} steps: taken over, done in "
        f"{taken_over:.1f} s; re-run {ran_before} steps, lost 0"
    )

    # No replica left: the task fails with its reason once the inactivity limit passes.
    survivor = next(r for r in relays if r.alive)
    task = await send(on_b, call("plod", steps=steps, pause=0.1), at_once=True)
    await eventually(lambda: handled(cluster, task.id, "step"), "a step", timeout=WAIT)
    await asyncio.to_thread(survivor.kill)
    final = await poll_until_settled(on_a, task.id)
    assert final.status.state == pb.TASK_STATE_FAILED
    reason = get_message_text(final.status.message)
    assert f"sent nothing for this task for over {INACTIVITY:g} s" in reason, reason


async def poll_until_settled(client: Client, task_id: str) -> pb.Task:
    """GetTask until the task is no longer submitted or working."""
    active = (pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_WORKING)
    deadline = time.monotonic() + INACTIVITY + WAIT
    while (task := await get(client, task_id)).status.state in active:
        assert time.monotonic() < deadline, f"task {task_id} stuck in {task.status.state}"
        await asyncio.sleep(0.2)
    return task


# -- the same send twice --------------------------------------------------------------------


async def test_the_same_send_to_both_gateways_runs_once(
    cluster: Cluster, gateways: tuple[str, str], http: httpx.AsyncClient
) -> None:
    a, b = gateways
    on_a, on_b = await a2a(http, a, "plodder"), await a2a(http, b, "plodder")
    message = call("plod", steps=5, pause=0.1)
    first = await send(on_a, message, at_once=True)
    again = await send(on_b, message)
    assert again.id == first.id
    assert again.status.state == pb.TASK_STATE_COMPLETED
    assert len(handled(cluster, first.id, "start")) == 1

    # At the same moment, to both (each gateway stamps its own source on its events).
    runs = []
    for _ in range(ROUNDS):
        message = call("plod", steps=2, pause=0.05)
        both = await asyncio.gather(send(on_a, message), send(on_b, message))
        assert both[0].id == both[1].id
        assert {t.status.state for t in both} == {pb.TASK_STATE_COMPLETED}
        runs.append(len(handled(cluster, both[0].id, "start")))
    print(f"\nthe same send to both gateways at once, {ROUNDS} times: runs {runs}")
    assert runs == [1] * ROUNDS


# -- a task waiting for input --------------------------------------------------------------


async def test_input_required_continues_on_the_other_gateway(
    cluster: Cluster, gateways: tuple[str, str], http: httpx.AsyncClient
) -> None:
    a, b = gateways
    on_a = await a2a(http, a, "booker")
    asked = await send(on_a, text("book a table"))
    assert asked.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert get_message_text(asked.status.message) == "for how many people?"

    on_b = await a2a(http, b, "booker")
    answer = text("4", task_id=asked.id, context_id=asked.context_id)
    booked = await send(on_b, answer)
    assert (booked.id, booked.status.state) == (asked.id, pb.TASK_STATE_COMPLETED)
    assert get_artifact_text(booked.artifacts[-1]) == "booked a table for 4"
    assert [get_message_text(m) for m in booked.history if m.role == pb.ROLE_USER] == [
        "book a table",
        "4",
    ]
    assert len(handled(cluster, asked.id, "turn")) == 2
    assert (await get(on_a, asked.id)).status.state == pb.TASK_STATE_COMPLETED

    # The same next message to both at once: one turn runs; the gateway that finds
    # it taken answers with the task, or refuses it (the task is working already).
    runs = []
    for n in range(ROUNDS):
        asked = await send(on_a, text("book a table"))
        answer = text(str(n + 1), task_id=asked.id, context_id=asked.context_id)
        both = await asyncio.gather(send(on_a, answer), send(on_b, answer), return_exceptions=True)
        tasks = [t for t in both if isinstance(t, pb.Task)]
        assert tasks and all(
            isinstance(t, UnsupportedOperationError) for t in both if t not in tasks
        )
        assert {(t.id, t.status.state) for t in tasks} == {(asked.id, pb.TASK_STATE_COMPLETED)}
        runs.append(len(handled(cluster, asked.id, "turn")) - 1)
    print(f"\nthe same next turn to both gateways at once, {ROUNDS} times: runs {runs}")
    assert runs == [1] * ROUNDS


class Greeter(Agent):
    agent_id = "greeter"

    @method
    def message(self, text: str) -> str:
        return f"hello {text}"


@pytest.fixture
def own_kafka(tmp_path: Path) -> Iterator[OwnKafka]:
    with running_kafka(tmp_path / "kafka") as kafka:
        yield kafka


@pytest.mark.slow
async def test_a_task_is_read_from_the_view_while_the_broker_is_away(own_kafka: OwnKafka) -> None:
    """A gateway catches up with the task log before answering about a task; with the
    broker gone it answers from what it read, at once, rather than wait or fail."""
    bus = Bus.kafka(own_kafka.bootstrap, bus_options={"prefix": f"t{uuid.uuid4().hex[:8]}"})
    bus.spawn(Greeter)
    app = create_app(bus, GatewaySettings(request_timeout=WAIT))
    async with (
        bus,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway"
        ) as http,
    ):
        sent = await http.post("/a2a/greeter", json=a2a_call("message/send", MESSAGE))
        task = sent.json()["result"]
        assert task["status"]["state"] == "completed"
        own_kafka.kill()
        await eventually(lambda: bus.transport.connection_problem is not None, "the broker lost")
        got = await asyncio.wait_for(
            http.post("/a2a/greeter", json=a2a_call("tasks/get", {"id": task["id"]})), WAIT
        )
        assert got.json()["result"]["status"]["state"] == "completed"
        assert got.json()["result"]["artifacts"] == task["artifacts"]
        own_kafka.start()


MESSAGE = {
    "message": {
        "kind": "message",
        "messageId": "m-1",
        "role": "user",
        "parts": [{"kind": "text", "text": "world"}],
    }
}


def a2a_call(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
