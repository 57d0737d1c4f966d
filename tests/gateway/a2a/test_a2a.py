"""The A2A binding, driven by the stock ``a2a-sdk`` client (its card resolver and
client over httpx against the gateway's ASGI app): plain and LLM agents, streams,
tasks, the protocol's errors, the 0.3 method names, and access control (a token
allowed only an LLM agent's ``chat`` still talks to it: the card advertises
streaming, and the gateway falls back to ``chat`` for ``SendStreamingMessage``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, TypeVar

import httpx
import orjson
import pytest
import uvicorn
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError, AgentCardResolutionError
from a2a.helpers.proto_helpers import (
    get_artifact_text,
    get_data_parts,
    get_message_text,
    new_data_part,
    new_message,
    new_text_part,
)
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError

from a2a_bus.bus import Bus
from a2a_bus.gateway import Access, GatewaySettings, create_app
from a2a_bus.gateway.a2a import TaskView
from a2a_bus.gateway.a2a.task_log import EntryKind
from a2a_bus.llm import AgentBuilder, LlmMessage, ScriptedClient, llm_agent_class

from .. import agents
from ..conftest import refused_as_out_of_range

pytestmark = pytest.mark.timeout(120)

WAIT = 20.0  # seconds; a guard against hangs, never a performance limit
BASE = "http://gateway"
T = TypeVar("T")


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, WAIT)


async def collect(stream: AsyncIterator[T]) -> list[T]:
    async def drain() -> list[T]:
        return [item async for item in stream]

    return await within(drain())


def reply(messages: Sequence[LlmMessage], tools: Any) -> str:
    """The scripted model: repeats the latest message and counts the user turns."""
    turns = sum(1 for m in messages if m.role == "user")
    return f"you said {messages[-1].content} (turn {turns})"


@pytest.fixture
async def bot(bus: Bus) -> str:
    loop = AgentBuilder("bot").llm(ScriptedClient(reply)).build()
    await bus.aspawn(llm_agent_class(loop, "bot", description="A scripted chat bot."))
    return "bot"


@pytest.fixture
async def http(bus: Bus, bot: str, settings: GatewaySettings) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(bus, settings))
    async with httpx.AsyncClient(transport=transport, base_url=BASE, timeout=WAIT) as client:
        yield client


async def card_of(http: httpx.AsyncClient, agent: str) -> pb.AgentCard:
    return await within(A2ACardResolver(http, f"{BASE}/a2a/{agent}").get_agent_card())


async def a2a_client(http: httpx.AsyncClient, agent: str, **config: Any) -> Client:
    card = await card_of(http, agent)
    return ClientFactory(ClientConfig(httpx_client=http, **config)).create(card)


def user_message(*parts: pb.Part, context_id: str | None = None) -> pb.Message:
    return new_message(list(parts), context_id=context_id, role=pb.ROLE_USER)


async def send(client: Client, message: pb.Message) -> list[pb.StreamResponse]:
    return await collect(client.send_message(pb.SendMessageRequest(message=message)))


def only_task(events: list[pb.StreamResponse]) -> pb.Task:
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


async def post(http: httpx.AsyncClient, path: str, body: Any, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    return await within(http.post(path, content=content, headers=headers))


def send_request(parts: list[dict[str, Any]], method: str = "SendMessage") -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts}
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"message": message}}


def configured(request: dict[str, Any], **configuration: Any) -> dict[str, Any]:
    request["params"]["configuration"] = configuration
    return request


def with_nested_data(depth: int) -> bytes:
    """A send whose data part nests ``depth`` arrays (more than orjson writes)."""
    body = orjson.dumps(send_request([{"data": "@"}]))
    return body.replace(b'"@"', b"[" * depth + b"]" * depth)


def with_role(request: dict[str, Any], role: str) -> dict[str, Any]:
    request["params"]["message"]["role"] = role
    return request


def without_role(request: dict[str, Any]) -> dict[str, Any]:
    del request["params"]["message"]["role"]
    return request


# -- cards ---------------------------------------------------------------------------


async def test_cards_are_built_from_discovery(http: httpx.AsyncClient) -> None:
    echo = await card_of(http, "echo")
    assert echo.name == "echo"
    assert [s.id for s in echo.skills] == ["echo", "count"]
    assert echo.capabilities.streaming  # count yields a stream
    assert {(i.url, i.protocol_version) for i in echo.supported_interfaces} == {
        (f"{BASE}/a2a/echo", "1.0"),
        (f"{BASE}/a2a/echo", "0.3"),
    }
    spec = await card_of(http, "spec")
    assert not spec.capabilities.streaming
    assert "subtract" in [s.id for s in spec.skills]

    gateway = await within(A2ACardResolver(http, BASE).get_agent_card())
    assert sorted(s.id for s in gateway.skills) == ["bot", "echo", "secret", "spec"]
    assert f"{BASE}/a2a/bot" in next(s.description for s in gateway.skills if s.id == "bot")


# -- plain agents --------------------------------------------------------------------


async def test_plain_text_reaches_the_conversational_method(http: httpx.AsyncClient) -> None:
    client = await a2a_client(http, "echo", streaming=False)
    text = f"hello {uuid.uuid4().hex}"
    task = only_task(await send(client, user_message(new_text_part(text))))
    assert task.status.state == pb.TASK_STATE_COMPLETED
    assert get_artifact_text(task.artifacts[0]) == text
    assert get_message_text(task.history[0]) == text

    fetched = await within(client.get_task(pb.GetTaskRequest(id=task.id)))
    assert fetched.status.state == pb.TASK_STATE_COMPLETED
    assert get_artifact_text(fetched.artifacts[0]) == text


async def test_a_data_part_calls_a_method(http: httpx.AsyncClient) -> None:
    client = await a2a_client(http, "spec")
    call = {"method": "subtract", "params": {"minuend": 42, "subtrahend": 23}}
    task = only_task(await send(client, user_message(new_data_part(call))))
    assert task.status.state == pb.TASK_STATE_COMPLETED
    assert get_data_parts(task.artifacts[0].parts) == [42 - 23]

    positional = orjson.dumps({"method": "subtract", "params": [5, 8]}).decode()
    task = only_task(await send(client, user_message(new_text_part(positional))))
    assert get_data_parts(task.artifacts[0].parts) == [5 - 8]


async def test_a_json_text_call_with_an_integer_the_bus_cannot_carry(
    http: httpx.AsyncClient,
) -> None:
    """orjson would read 2**64 as a float, so the agent would compute on another
    number: the call is refused. JSON text that calls nothing stays text."""
    client = await a2a_client(http, "spec", streaming=False)
    huge = 2**64
    call = f'{{"method": "subtract", "params": [{huge}, 1]}}'
    with pytest.raises(InvalidParamsError) as caught:
        await send(client, user_message(new_text_part(call)))
    assert str(huge) in str(caught.value) and "send it as a string" in str(caught.value)

    echo = await a2a_client(http, "echo", streaming=False)
    text = f'{{"note": {huge}}}'
    task = only_task(await send(echo, user_message(new_text_part(text))))
    assert get_artifact_text(task.artifacts[0]) == text


async def test_a_failing_call_fails_the_task(http: httpx.AsyncClient) -> None:
    client = await a2a_client(http, "spec")
    call = {"method": "subtract", "params": {"minuend": 1}}  # subtrahend missing
    task = only_task(await send(client, user_message(new_data_part(call))))
    assert task.status.state == pb.TASK_STATE_FAILED
    assert "Invalid params" in get_message_text(task.status.message)
    assert get_data_parts(task.status.message.parts)[0]["code"] == -32602


async def test_plain_text_to_an_agent_without_a_conversational_method(
    http: httpx.AsyncClient,
) -> None:
    client = await a2a_client(http, "spec")
    with pytest.raises(InvalidParamsError) as caught:
        await send(client, user_message(new_text_part("hi")))
    assert "subtract" in str(caught.value) and "get_data" in str(caught.value)


# -- streams -------------------------------------------------------------------------


async def test_a_streaming_method_answers_message_stream(http: httpx.AsyncClient) -> None:
    client = await a2a_client(http, "echo")  # streaming client, streaming card
    call = {"method": "count", "params": {"n": 5}}
    events = await send(client, user_message(new_data_part(call)))
    first, started, updates, last = events[0], events[1], events[2:-1], events[-1]
    assert first.task.status.state == pb.TASK_STATE_SUBMITTED  # the task as it was sent
    assert started.status_update.status.state == pb.TASK_STATE_WORKING  # its agent took it
    assert [get_data_parts(u.artifact_update.artifact.parts) for u in updates] == [
        [i] for i in range(5)
    ]
    assert [u.artifact_update.append for u in updates] == [False, True, True, True, True]
    assert last.status_update.status.state == pb.TASK_STATE_COMPLETED

    task = await within(client.get_task(pb.GetTaskRequest(id=first.task.id)))
    assert get_data_parts(task.artifacts[0].parts) == list(range(5))


async def test_a_non_streaming_method_over_message_stream(http: httpx.AsyncClient) -> None:
    client = await a2a_client(http, "echo")
    text = uuid.uuid4().hex
    events = await send(client, user_message(new_text_part(text)))
    assert [e.WhichOneof("payload") for e in events] == [
        "task",
        "status_update",
        "artifact_update",
        "status_update",
    ]
    assert events[1].status_update.status.state == pb.TASK_STATE_WORKING
    assert get_artifact_text(events[2].artifact_update.artifact) == text
    assert events[2].artifact_update.last_chunk
    assert events[3].status_update.status.state == pb.TASK_STATE_COMPLETED


# -- LLM agents ----------------------------------------------------------------------


async def test_llm_agent_chats_per_context(http: httpx.AsyncClient, bot: str) -> None:
    client = await a2a_client(http, bot, streaming=False)
    context = uuid.uuid4().hex
    first = only_task(await send(client, user_message(new_text_part("hi"), context_id=context)))
    second = only_task(await send(client, user_message(new_text_part("again"), context_id=context)))
    other = only_task(await send(client, user_message(new_text_part("fresh"))))
    assert get_artifact_text(first.artifacts[0]) == "you said hi (turn 1)"
    assert get_artifact_text(second.artifacts[0]) == "you said again (turn 2)"
    assert get_artifact_text(other.artifacts[0]) == "you said fresh (turn 1)"
    assert first.context_id == second.context_id == context != other.context_id


async def test_llm_agent_streams_tokens(http: httpx.AsyncClient, bot: str) -> None:
    client = await a2a_client(http, bot)
    events = await send(client, user_message(new_text_part("stream please")))
    tokens = [get_artifact_text(e.artifact_update.artifact) for e in events[1:-1]]
    expected = "you said stream please (turn 1)"
    assert len(tokens) > 1 and "".join(tokens) == expected
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    task = await within(client.get_task(pb.GetTaskRequest(id=events[0].task.id)))
    assert get_artifact_text(task.artifacts[0]) == expected


@pytest.fixture
async def served(bus: Bus, settings: GatewaySettings) -> AsyncIterator[str]:
    """The gateway behind a real uvicorn server on 127.0.0.1."""
    config = uvicorn.Config(
        create_app(bus, settings), host="127.0.0.1", port=0, log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())

    async def started() -> None:
        while not (server.started or serving.done()):
            await asyncio.sleep(0.01)

    await within(started())
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await within(serving)


async def test_leaving_a_stream_leaves_its_task_running(served: str) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        card = await within(A2ACardResolver(http, f"{served}/a2a/echo").get_agent_card())
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        call = {"method": "count", "params": {"n": 40, "pause": 0.005}}
        events = client.send_message(
            pb.SendMessageRequest(message=user_message(new_data_part(call)))
        )
        first = await within(anext(events))
        started = await within(anext(events))
        assert started.status_update.status.state == pb.TASK_STATE_WORKING
        chunks = [await within(anext(events)) for _ in range(3)]
        assert [get_data_parts(c.artifact_update.artifact.parts) for c in chunks] == [[0], [1], [2]]
        await within(events.aclose())  # the client leaves mid-stream

        # The task is the bus's, not the connection's: it runs to its end.
        task = await within(until_done(client, first.task.id))
        assert task.status.state == pb.TASK_STATE_COMPLETED
        assert get_data_parts(task.artifacts[0].parts) == list(range(40))
    assert agents.COUNTED["last"] == 39


# -- tasks ---------------------------------------------------------------------------


async def test_cancel_a_running_task(http: httpx.AsyncClient) -> None:
    client = await a2a_client(http, "echo", streaming=False, polling=True)
    call = {"method": "count", "params": {"n": 400, "pause": 0.005}}
    task = only_task(await send(client, user_message(new_data_part(call))))
    assert task.status.state == pb.TASK_STATE_WORKING  # answered before the work is done

    async def counting() -> None:
        while not (await client.get_task(pb.GetTaskRequest(id=task.id))).artifacts:
            await asyncio.sleep(0.01)

    await within(counting())
    canceled = await within(client.cancel_task(pb.CancelTaskRequest(id=task.id)))
    assert canceled.status.state == pb.TASK_STATE_CANCELED
    # Echo handles one message at a time: this answer comes after the generator ended.
    after = only_task(await send(client, user_message(new_text_part("after"))))
    assert after.status.state == pb.TASK_STATE_WORKING
    await within(until_done(client, after.id))
    assert agents.COUNTED["last"] < 399, "the agent's generator ran to its end"

    with pytest.raises(TaskNotCancelableError):
        await within(client.cancel_task(pb.CancelTaskRequest(id=task.id)))
    fetched = await within(client.get_task(pb.GetTaskRequest(id=task.id)))
    assert fetched.status.state == pb.TASK_STATE_CANCELED


async def until_done(client: Client, task_id: str) -> pb.Task:
    """Poll a task (as a client that asked for an immediate answer does) until it ends."""
    while True:
        task = await client.get_task(pb.GetTaskRequest(id=task_id))
        if task.status.state not in (pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_WORKING):
            return task
        await asyncio.sleep(0.01)


async def test_tasks_are_per_agent_and_unknown_ids_are_not_found(
    http: httpx.AsyncClient,
) -> None:
    echo = await a2a_client(http, "echo", streaming=False)
    task = only_task(await send(echo, user_message(new_text_part("x"))))
    spec = await a2a_client(http, "spec", streaming=False)
    with pytest.raises(TaskNotFoundError):
        await within(spec.get_task(pb.GetTaskRequest(id=task.id)))
    with pytest.raises(TaskNotFoundError):
        await within(echo.get_task(pb.GetTaskRequest(id="no-such-task")))


async def test_the_task_view_is_bounded(bus: Bus) -> None:
    view = TaskView(bus.transport, bus.topics, "bounded", "test", max_bytes=1 << 20, max_tasks=2)
    await view.start()
    try:
        ids = [f"t-{i}" for i in range(3)]
        for task_id in ids:
            await view.write(EntryKind.SUBMITTED, task_id, submitted_record("echo", "open"))
        await within(view.sync())
        assert view.get(ids[0]) is None  # the oldest is forgotten
        found = view.find(ids[2], "echo", "open")
        assert found is not None and found.task.id == ids[2]
        assert view.find(ids[2], "spec", "open") is None
        assert view.find(ids[2], "echo", "someone-else") is None
    finally:
        await view.stop()


async def test_task_log_records_of_the_wrong_shape_are_left_out_with_a_warning(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    view = TaskView(bus.transport, bus.topics, "shapes", "test", max_bytes=1 << 20, max_tasks=9)
    await view.start()
    try:
        # Anyone may write to the task log: a list where an object belongs, a bad config.
        record = {**submitted_record("echo", "open"), "message": ["hi"]}
        await view.write(EntryKind.SUBMITTED, "t-list", record)
        await view.write(EntryKind.SUBMITTED, "t-fine", submitted_record("echo", "open"))
        await view.write(EntryKind.PUSH_SET, "t-fine", {"id": "p", "url": ["x"]})
        await within(view.sync())
        fold = view.get("t-fine")
        assert view.get("t-list") is None and fold is not None and fold.push == {}
    finally:
        await view.stop()
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
    assert "task t-list: a submitted record that cannot be read" in caplog.text
    assert "task t-fine: a push-set record that cannot be read" in caplog.text


def submitted_record(endpoint: str | None, owner: str, agent: str = "echo") -> dict[str, Any]:
    """A gateway's ``submitted`` record of a task (what TaskService writes)."""
    return {
        "owner": owner,
        "endpoint": endpoint,
        "agent": agent,
        "contextId": "c",
        "message": {"role": "user", "parts": [["text", "hi"]], "messageId": uuid.uuid4().hex},
        "call": {"method": "echo", "streaming": False, "conversational": True},
        "requestId": uuid.uuid4().hex,
        "inactivity": 30.0,
    }


async def test_the_gateway_endpoint_routes_by_method(http: httpx.AsyncClient) -> None:
    card = await within(A2ACardResolver(http, BASE).get_agent_card())
    client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
    call = {"method": "subtract", "params": {"minuend": 10, "subtrahend": 4}}
    task = only_task(await send(client, user_message(new_data_part(call))))
    assert get_data_parts(task.artifacts[0].parts) == [10 - 4]
    with pytest.raises(InvalidParamsError, match="/a2a/"):
        await send(client, user_message(new_text_part("hello")))
    with pytest.raises(InvalidParamsError, match="nope"):
        await send(client, user_message(new_data_part({"method": "nope"})))


# -- the protocol's errors -----------------------------------------------------------


async def test_unknown_agent(http: httpx.AsyncClient) -> None:
    with pytest.raises(AgentCardResolutionError):
        await card_of(http, "nobody")
    response = await post(http, "/a2a/nobody", send_request([{"text": "hi"}]))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        (b"{not json", -32700, "Parse error"),
        (b"[]", -32600, "Invalid Request"),
        ([send_request([{"text": "a"}])], -32600, "batch"),
        ({"jsonrpc": "2.0", "method": "SendMessage", "params": {}}, -32600, "with an id"),
        ({"jsonrpc": "1.0", "method": "SendMessage", "id": 1}, -32600, "Invalid Request"),
        ({"jsonrpc": "2.0", "method": "DoThings", "id": 1}, -32601, "DoThings"),
        ({"jsonrpc": "2.0", "method": "SendMessage", "id": 1, "params": []}, -32602, "object"),
        (send_request([]), -32602, "parts"),
        (without_role(send_request([{"text": "hi"}])), -32602, "role is required"),
        (with_role(send_request([{"text": "hi"}]), "ROLE_AGENT"), -32602, "role must be"),
        (send_request([{"url": "http://x/y.png"}]), -32005, "file"),
        (
            {"jsonrpc": "2.0", "method": "ListTasks", "id": 1, "params": {"pageSize": 0}},
            -32602,
            "pageSize",
        ),
        (send_request([{"text": "hi"}], "tasks/pushNotificationConfig/set"), -32602, "taskId"),
        (send_request([{"data": {"method": "nope"}}]), -32602, "echo, count"),
        (send_request([{"data": {"method": "echo", "params": {"_topic": "x"}}}]), -32602, "_topic"),
        # Deeper than JSON is carried: refused before a task exists (not a 500 later).
        (with_nested_data(300), -32602, "parts[0].data is not JSON"),
        (with_nested_data(600), -32602, "parts[0].data is not JSON"),
        (
            send_request([{"data": {"method": "echo", "params": ["x"]}}, {"text": "and this"}]),
            -32602,
            "carries only that call; this one has 1 other part",
        ),
        (send_request([{"kind": "video", "url": "x"}]), -32602, "'video' is not a part kind"),
        (send_request([{"kind": "video", "text": "x"}]), -32602, "'video' is not a part kind"),
        (
            configured(send_request([{"text": "hi"}]), returnImmediately="false"),
            -32602,
            "returnImmediately must be true or false",
        ),
        (
            configured(send_request([{"text": "hi"}], "message/send"), blocking=0),
            -32602,
            "blocking must be true or false",
        ),
        (
            configured(send_request([{"text": "hi"}]), historyLength=1.5),
            -32602,
            "historyLength must be a non-negative integer",
        ),
    ],
)
async def test_malformed_requests_get_json_rpc_errors(
    http: httpx.AsyncClient, body: Any, code: int, words: str
) -> None:
    response = await post(http, "/a2a/echo", body)
    assert response.status_code == 200
    error = response.json()["error"]
    assert error["code"] == code
    assert words.lower() in orjson.dumps(error).decode().lower()


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "1.0", "method": "SendMessage", "params": {}, "id": "a-1"},
        {"jsonrpc": "2.0", "params": {}, "id": "a-1"},
        {"jsonrpc": "2.0", "method": 5, "id": "a-1"},
    ],
)
async def test_an_invalid_request_keeps_its_readable_id(
    http: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    answer = (await post(http, "/a2a/echo", body)).json()
    assert (answer["error"]["code"], answer["id"]) == (-32600, "a-1")


def _with_id(literal: int, method_name: str, params: bytes) -> bytes:
    """A request whose id is ``literal`` as written (first: the same column in each body)."""
    return b'{"id": %d, "jsonrpc": "2.0", "method": "%s", "params": %s}' % (
        literal,
        method_name.encode(),
        params,
    )


@pytest.mark.parametrize("literal", [2**70, -(2**70), 10**400], ids=["2**70", "-2**70", "10**400"])
async def test_an_id_beyond_64_bits_is_refused_as_rpc_refuses_it(
    http: httpx.AsyncClient, literal: int
) -> None:
    """Read as a float it would come back another number: refused with id null
    (-32600 naming it; -32700 past a double's range), the same answer as /rpc's."""
    a2a = await post(http, "/a2a/echo", _with_id(literal, "GetTask", b'{"id": "t"}'))
    rpc = await post(http, "/rpc", _with_id(literal, "echo", b"[1]"))
    assert a2a.status_code == rpc.status_code == 200
    answer = a2a.json()  # (the stdlib keeps big integers exact)
    assert answer == rpc.json()
    assert answer["id"] is None and answer["error"]["code"] in (-32600, -32700), answer
    if literal.bit_length() <= 1024:  # within a double: refused as out of range
        assert refused_as_out_of_range(answer, literal), answer


@pytest.mark.parametrize("literal", [2**64 - 1, -(2**63)])
async def test_an_id_at_the_64_bit_limits_comes_back_exactly(
    http: httpx.AsyncClient, literal: int
) -> None:
    response = await post(http, "/a2a/echo", _with_id(literal, "GetTask", b'{"id": "t"}'))
    answer = response.json()
    assert answer["error"]["code"] == -32001  # no such task: the call was read
    assert answer["id"] == literal and type(answer["id"]) is int


async def test_version_header_is_checked(http: httpx.AsyncClient) -> None:
    response = await post(http, "/a2a/echo", send_request([{"text": "hi"}]), **{"A2A-Version": "9"})
    assert response.json()["error"]["code"] == -32009


# -- A2A 0.3 -------------------------------------------------------------------------


async def test_a_0_3_client_uses_the_0_3_method_names(http: httpx.AsyncClient) -> None:
    card = await card_of(http, "echo")
    legacy = [i for i in card.supported_interfaces if i.protocol_version == "0.3"]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(legacy)  # a card as a 0.3 agent would publish it
    config = ClientConfig(httpx_client=http)
    client = ClientFactory(config).create(card)
    assert type(client._transport).__name__ == "CompatJsonRpcTransport"

    call = {"method": "count", "params": {"n": 3}}
    events = await send(client, user_message(new_data_part(call)))
    assert events[1].status_update.status.state == pb.TASK_STATE_WORKING
    assert [get_data_parts(e.artifact_update.artifact.parts) for e in events[2:-1]] == [
        [0],
        [1],
        [2],
    ]
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    task = await within(client.get_task(pb.GetTaskRequest(id=events[0].task.id)))
    assert get_data_parts(task.artifacts[0].parts) == [0, 1, 2]

    raw = {
        "jsonrpc": "2.0",
        "id": "r",
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "m-1",
                "role": "user",
                "parts": [{"kind": "text", "text": "plain 0.3"}],
            }
        },
    }
    result = (await post(http, "/a2a/echo", raw)).json()["result"]
    assert result["kind"] == "task" and result["status"]["state"] == "completed"
    assert result["artifacts"][0]["parts"] == [{"kind": "text", "text": "plain 0.3"}]


@pytest.mark.parametrize(
    ("data", "echoed"),
    [
        ({"value": [1, 2]}, {"value": [1, 2]}),  # the SDK's wrapping of a non-object
        ({"x": 1}, {"x": 1}),  # flagged, but no wrapping: kept as sent
        ({"value": 1, "x": 2}, {"x": 2, "value": 1}),
    ],
)
async def test_a_0_3_data_part_flagged_as_wrapped_keeps_what_it_carries(
    http: httpx.AsyncClient, data: dict[str, Any], echoed: dict[str, Any]
) -> None:
    part = {"kind": "data", "data": data, "metadata": {"data_part_compat": True}}
    raw = send_request([part], "message/send")
    raw["params"]["message"].update(kind="message", role="user")
    result = (await post(http, "/a2a/echo", raw)).json()["result"]
    assert result["status"]["state"] == "completed", result
    assert result["artifacts"][0]["parts"][0]["data"] == echoed


# -- access --------------------------------------------------------------------------

ADMIN, LIMITED = "admin-token", "limited-token"


def secured() -> GatewaySettings:
    limited = Access(name="limited", agents=("echo",), methods=("echo",))
    return GatewaySettings(
        request_timeout=WAIT, tokens={ADMIN: Access(name="admin"), LIMITED: limited}
    )


async def test_tokens_and_allow_lists_apply(bus: Bus) -> None:
    transport = httpx.ASGITransport(app=create_app(bus, secured()))

    def http(token: str | None) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(transport=transport, base_url=BASE, headers=headers, timeout=WAIT)

    async with http(None) as anonymous, http(ADMIN) as admin, http(LIMITED) as limited:
        assert (
            await within(anonymous.get("/a2a/echo/.well-known/agent-card.json"))
        ).status_code == 401
        refused = await post(anonymous, "/a2a/echo", send_request([{"text": "hi"}]))
        assert refused.status_code == 401 and "Bearer" in refused.headers["www-authenticate"]

        card = await card_of(admin, "echo")
        assert "bearer" in card.security_schemes
        admin_task = only_task(
            await send(
                await a2a_client(admin, "echo", streaming=False), user_message(new_text_part("x"))
            )
        )

        client = await a2a_client(limited, "echo", streaming=False)
        text = uuid.uuid4().hex
        task = only_task(await send(client, user_message(new_text_part(text))))
        assert get_artifact_text(task.artifacts[0]) == text
        with pytest.raises(A2AClientError, match="403"):  # count is not an allowed method
            await send(client, user_message(new_data_part({"method": "count", "params": {"n": 1}})))
        with pytest.raises(TaskNotFoundError):  # another token's task
            await within(client.get_task(pb.GetTaskRequest(id=admin_task.id)))
        with pytest.raises(AgentCardResolutionError):  # not an allowed agent: not there
            await card_of(limited, "spec")
        hidden = await post(limited, "/a2a/spec", send_request([{"text": "hi"}]))
        assert hidden.status_code == 404

        gateway = await within(A2ACardResolver(limited, BASE).get_agent_card())
        assert [s.id for s in gateway.skills] == ["echo"]


async def test_body_limit_applies(bus: Bus) -> None:
    app = create_app(bus, GatewaySettings(request_timeout=WAIT, max_body_bytes=1024))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE, timeout=WAIT) as http:
        response = await post(http, "/a2a/echo", send_request([{"text": "x" * 2048}]))
    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600


# -- a token allowed only chat talks to an LLM agent with a stock client -------------------

CHAT_ONLY_TOKEN = "chat-only-token"


def hello(messages: Sequence[LlmMessage], tools: Any) -> str:
    return "hello there"


@pytest.fixture
async def hello_bus() -> AsyncIterator[Bus]:
    """A bus of its own: only the chat bot, whose model says hello."""
    async with Bus.memory() as running:
        loop = AgentBuilder("bot").llm(ScriptedClient(hello)).build()
        await running.aspawn(llm_agent_class(loop, "bot", description="A scripted chat bot."))
        yield running


async def test_a_chat_only_token_can_talk_with_a_stock_client(hello_bus: Bus) -> None:
    tokens = {CHAT_ONLY_TOKEN: Access(name="chatter", methods=("chat",))}
    app = create_app(hello_bus, GatewaySettings(request_timeout=WAIT, tokens=tokens))
    headers = {"authorization": f"Bearer {CHAT_ONLY_TOKEN}"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url=BASE, headers=headers, timeout=WAIT
    ) as http:
        resolver = A2ACardResolver(http, f"{BASE}/a2a/bot")
        card = await asyncio.wait_for(resolver.get_agent_card(), WAIT)
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        message = new_message([new_text_part("hi")], role=pb.ROLE_USER)

        async def talk() -> list[pb.StreamResponse]:
            request = pb.SendMessageRequest(message=message)
            return [event async for event in client.send_message(request)]

        events = await asyncio.wait_for(talk(), WAIT)
    texts = [
        get_artifact_text(e.artifact_update.artifact)
        for e in events
        if e.HasField("artifact_update")
    ]
    texts += [get_artifact_text(a) for e in events if e.HasField("task") for a in e.task.artifacts]
    assert "hello there" in "".join(texts), events
