"""One token cannot flood the A2A tasks a gateway keeps: each owner holds at most
``max_tasks_per_owner`` tasks, its new tasks make room among its own finished ones,
and an owner whose tasks are all unfinished is refused (HTTP 429, JSON-RPC -32000)
while other tokens' tasks survive and other tokens go on sending.

What a token holds is its own, told apart by the token itself, not by its ``name``:
another token (with the default name, or the same ``name`` in a tokens file) does
not see or cancel its tasks, and does not join its conversations. An LLM agent
keeps one conversation per A2A ``contextId`` and token: the gateway scopes the
agent's ``session_id`` by the token, so another token naming the same guessable
``contextId`` starts a conversation of its own instead of reading the first one.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import orjson
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.helpers.proto_helpers import new_data_part, new_message
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette

from a2a_bus.bus import Bus
from a2a_bus.gateway import Access, GatewaySettings, create_app
from a2a_bus.gateway.a2a import DEFAULT_MAX_TASKS, TaskView
from a2a_bus.gateway.a2a.task_log import EntryKind
from a2a_bus.llm import AgentBuilder, LlmMessage, ScriptedClient, llm_agent_class
from tests.gateway.agents import Echo

from .test_a2a import BASE, WAIT, collect, submitted_record, within

pytestmark = pytest.mark.timeout(120)

FLOOD, QUIET = "flood-token", "quiet-token"
MAX_TASKS, PER_OWNER = 8, 3


def secured(**bounds: int) -> GatewaySettings:
    tokens = {FLOOD: Access(name="flood"), QUIET: Access(name="quiet")}
    return GatewaySettings(request_timeout=WAIT, tokens=tokens, **bounds)


def clients(app: Starlette) -> tuple[httpx.AsyncClient, httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)

    def client(token: str) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {token}"}
        return httpx.AsyncClient(transport=transport, base_url=BASE, headers=headers, timeout=WAIT)

    return client(FLOOD), client(QUIET)


@pytest.fixture
async def small(bus: Bus) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    settings = secured(a2a_max_tasks=MAX_TASKS, a2a_max_tasks_per_owner=PER_OWNER)
    flood, quiet = clients(create_app(bus, settings))
    async with flood, quiet:
        yield flood, quiet


async def rpc(http: httpx.AsyncClient, agent: str, method: str, params: Any) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return await within(http.post(f"/a2a/{agent}", content=orjson.dumps(body)))


def call(method: str, blocking: bool = True, **params: Any) -> dict[str, Any]:
    """``SendMessage`` params calling ``method``."""
    part = {"data": {"method": method, "params": params}}
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [part]}
    return {"message": message, "configuration": {"returnImmediately": not blocking}}


async def subtract(http: httpx.AsyncClient) -> str:
    """A task that is over when its answer comes; its id."""
    response = await rpc(http, "spec", "SendMessage", call("subtract", minuend=5, subtrahend=2))
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return str(task["id"])


async def found(http: httpx.AsyncClient, agent: str, task_id: str) -> bool:
    body = (await rpc(http, agent, "GetTask", {"id": task_id})).json()
    if "error" in body:
        assert body["error"]["code"] == -32001, body
        return False
    return True


async def test_a_flood_evicts_the_flooders_own_tasks(
    small: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    flood, quiet = small
    kept = [await subtract(quiet) for _ in range(2)]
    flooded = [await subtract(flood) for _ in range(MAX_TASKS * 2)]
    for task_id in kept:  # the store never filled: the flood made room among its own
        assert await found(quiet, "spec", task_id)
    assert [await found(flood, "spec", t) for t in flooded] == [False] * (
        len(flooded) - PER_OWNER
    ) + [True] * PER_OWNER
    kept.append(await subtract(quiet))  # the quiet token still sends
    assert await found(quiet, "spec", kept[-1])


async def test_an_owner_with_only_unfinished_tasks_is_refused(
    small: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    flood, quiet = small
    earlier = await subtract(quiet)
    running = []
    for _ in range(PER_OWNER):  # echo handles one at a time: these stay unfinished
        params = call("count", blocking=False, n=400, pause=0.005)
        response = await rpc(flood, "echo", "SendMessage", params)
        task = response.json()["result"]["task"]
        assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        running.append(task["id"])

    refused = await rpc(flood, "spec", "SendMessage", call("subtract", minuend=1, subtrahend=1))
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == -32000 and "Too many tasks" in error["message"]
    assert error["data"][0]["reason"] == "TOO_MANY_TASKS"
    assert error["data"][0]["metadata"] == {"maxTasksPerOwner": str(PER_OWNER)}

    # 0.3 names and a stream are refused alike, before any SSE starts.
    message = {
        "kind": "message",
        "messageId": "m-1",
        "role": "user",
        "parts": [{"kind": "text", "text": "x"}],
    }
    legacy = await rpc(flood, "echo", "message/stream", {"message": message})
    assert legacy.status_code == 429 and legacy.headers["content-type"] == "application/json"
    assert legacy.json()["error"]["code"] == -32000
    assert legacy.json()["error"]["data"] == {"maxTasksPerOwner": str(PER_OWNER)}

    # A stock client sees an error, not a 500 and not a hang.
    card = await within(A2ACardResolver(flood, f"{BASE}/a2a/spec").get_agent_card())
    client = ClientFactory(ClientConfig(httpx_client=flood, streaming=False)).create(card)
    message_pb = new_message(
        [new_data_part({"method": "subtract", "params": {"minuend": 1, "subtrahend": 1}})],
        role=pb.ROLE_USER,
    )
    with pytest.raises(A2AClientError, match="429"):
        await collect(client.send_message(pb.SendMessageRequest(message=message_pb)))

    # The other token is not held to the flooder's bound, and its task is still there.
    assert await found(quiet, "spec", earlier)
    await subtract(quiet)

    # A finished task makes room again: cancel one, and the flooder sends.
    canceled = await rpc(flood, "echo", "CancelTask", {"id": running[0]})
    assert canceled.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    await subtract(flood)
    assert not await found(flood, "echo", running[0])  # the finished one made the room
    for task_id in running[1:]:
        assert (await rpc(flood, "echo", "CancelTask", {"id": task_id})).status_code == 200


async def test_the_default_bound_keeps_other_tokens_tasks(bus: Bus) -> None:
    """The gateway as ``create_app`` makes it: one token's flood past the whole store
    leaves another token's task in place."""
    flood, quiet = clients(create_app(bus, secured()))
    async with flood, quiet:
        kept = await subtract(quiet)
        for _ in range(DEFAULT_MAX_TASKS + 5):
            await subtract(flood)
        assert await found(quiet, "spec", kept)


async def owned_view(bus: Bus, max_tasks: int, per_owner: int | None) -> TaskView:
    view = TaskView(
        bus.transport,
        bus.topics,
        uuid.uuid4().hex[:8],
        "test",
        max_bytes=1 << 20,
        max_tasks=max_tasks,
        max_tasks_per_owner=per_owner,
    )
    await view.start()
    return view


async def task_of(view: TaskView, owner: str, *, finished: bool) -> str:
    task_id = uuid.uuid4().hex
    await view.write(EntryKind.SUBMITTED, task_id, submitted_record("echo", owner))
    if finished:
        await view.write(EntryKind.CANCELED, task_id, {})
    await within(view.sync())
    return task_id


async def test_the_view_evicts_the_owners_oldest_finished_task_first(bus: Bus) -> None:
    view = await owned_view(bus, 10, 3)
    try:
        other = await task_of(view, "b", finished=True)
        running = await task_of(view, "a", finished=False)
        done = await task_of(view, "a", finished=True)
        later = await task_of(view, "a", finished=False)
        await task_of(view, "a", finished=True)  # a is at 3: its oldest finished goes
        assert view.find(done, "echo", "a") is None
        assert view.find(running, "echo", "a") is not None
        assert len(view.owned("a")) == 3 and len(view.owned("b")) == 1
        assert view.unfinished("a") == 2
        assert view.find(other, "echo", "b") is not None
        assert view.find(later, "echo", "a") is not None
    finally:
        await view.stop()


def test_the_bounds_are_gateway_settings() -> None:
    environ = {
        "A2A_GATEWAY_A2A_MAX_TASKS": "40",
        "A2A_GATEWAY_A2A_MAX_TASKS_PER_OWNER": "7",
    }
    settings = GatewaySettings.from_env(environ)
    assert (settings.a2a_max_tasks, settings.a2a_max_tasks_per_owner) == (40, 7)
    with pytest.raises(ValueError, match="A2A_GATEWAY_A2A_MAX_TASKS_PER_OWNER='many'"):
        GatewaySettings.from_env({"A2A_GATEWAY_A2A_MAX_TASKS_PER_OWNER": "many"})
    with pytest.raises(ValueError, match="a2a_max_tasks_per_owner must be at least 1"):
        GatewaySettings(a2a_max_tasks_per_owner=0)


async def test_a_full_view_forgets_its_oldest_finished_task_first(bus: Bus) -> None:
    view = await owned_view(bus, 2, None)
    try:
        first = await task_of(view, "a", finished=False)
        second = await task_of(view, "b", finished=True)
        await task_of(view, "a", finished=False)
        assert view.find(first, "echo", "a") is not None  # running: kept over a finished one
        assert view.find(second, "echo", "b") is None
        assert len(view.owned("b")) == 0
    finally:
        await view.stop()


# -- tasks are private to the token that created them --------------------------------------

ALICE = "alice-" + uuid.uuid4().hex
MALLORY = "mallory-" + uuid.uuid4().hex


@pytest.fixture
async def echo_bus() -> AsyncIterator[Bus]:
    """A bus of its own with the echo agent."""
    async with Bus.memory() as running:
        await running.aspawn(Echo, 1, [])
        yield running


async def call_as(http: httpx.AsyncClient, token: str, method: str, params: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"authorization": f"Bearer {token}"}
    response = await asyncio.wait_for(
        http.post("/a2a/echo", content=orjson.dumps(body), headers=headers), WAIT
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize(
    "tokens",
    [
        # Tokens made in code with no name: both are "anonymous".
        {ALICE: Access(), MALLORY: Access(agents=("echo",))},
        # A tokens file where two people were given the same display name.
        {ALICE: Access(name="ops"), MALLORY: Access(name="ops", agents=("echo",))},
    ],
    ids=["default-names", "same-name"],
)
async def test_another_token_does_not_see_or_cancel_a_task(
    echo_bus: Bus, tokens: dict[str, Access]
) -> None:
    """Mallory's GetTask and CancelTask of Alice's task answer -32001, as for any other
    token (she used to get the task, history and answer included)."""
    app = create_app(echo_bus, GatewaySettings(request_timeout=WAIT, tokens=tokens))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        secret = "alice's secret " + uuid.uuid4().hex
        message = {
            "kind": "message",
            "messageId": uuid.uuid4().hex,
            "role": "user",
            "parts": [{"kind": "text", "text": secret}],
        }
        sent = await call_as(http, ALICE, "message/send", {"message": message})
        task_id = sent["result"]["id"]
        assert sent["result"]["status"]["state"] == "completed"
        # Alice herself sees it.
        own = await call_as(http, ALICE, "tasks/get", {"id": task_id})
        assert own["result"]["id"] == task_id

        seen = await call_as(http, MALLORY, "tasks/get", {"id": task_id})
        assert "result" not in seen, f"another token read the task: {seen}"
        assert seen["error"]["code"] == -32001


# -- a conversation is private to the token that started it --------------------------------


def recall(messages: Sequence[LlmMessage], tools: Any) -> str:
    """The scripted model: repeats every user message of the conversation it is given."""
    return " | ".join(str(m.content) for m in messages if m.role == "user")


@pytest.fixture
async def recall_bus() -> AsyncIterator[Bus]:
    """A bus of its own with a chat bot whose model repeats what it was told."""
    async with Bus.memory() as running:
        loop = AgentBuilder("bot").llm(ScriptedClient(recall)).build()
        await running.aspawn(llm_agent_class(loop, "bot", description="A scripted chat bot."))
        yield running


async def say(http: httpx.AsyncClient, token: str, text: str, context_id: str | None) -> Any:
    message: dict[str, Any] = {
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
    }
    if context_id is not None:
        message["contextId"] = context_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    response = await asyncio.wait_for(
        http.post(
            "/a2a/bot",
            content=orjson.dumps(body),
            headers={"authorization": f"Bearer {token}"},
        ),
        WAIT,
    )
    assert response.status_code == 200, response.text
    return response.json()


def answer_text(answer: Any) -> str:
    task = answer["result"]
    assert task["status"]["state"] == "completed", task
    return "".join(p.get("text", "") for a in task["artifacts"] for p in a["parts"])


async def test_another_token_cannot_join_a_conversation(recall_bus: Bus) -> None:
    tokens = {ALICE: Access(name="alice"), MALLORY: Access(name="mallory")}
    app = create_app(recall_bus, GatewaySettings(request_timeout=WAIT, tokens=tokens))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        secret = "my card number is " + uuid.uuid4().hex
        first = await say(http, ALICE, secret, None)
        assert answer_text(first) == secret
        context_id = first["result"]["contextId"]

        answer = await say(http, MALLORY, "what did I tell you?", context_id)
        if "error" in answer:  # refusing a foreign context is a fix too
            return
        assert secret not in answer_text(answer), "another token read Alice's conversation"
