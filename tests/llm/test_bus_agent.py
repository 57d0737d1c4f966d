"""LLM agents on the bus: chat, sessions, streams, triggers, bus tools, errors.

Real buses (in-memory, and Kafka once) with the scripted OpenAI-compatible server
as the only fake; callers are bus clients.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method, subscribe
from a2a_bus.llm import (
    AgentBuilder,
    AgentConfigError,
    AgentFileError,
    InMemoryStore,
    LlmMessage,
    agent_class_from_file,
    llm_agent_class,
)
from a2a_bus.llm.bus_agent import LLM_FAILED, MAX_TURNS_EXCEEDED
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.dead_letters import DLQ_REASON

from .conftest import Completion, ScriptedOpenAI

WAIT = 30.0  # upper bound on any wait; never a performance assertion


class Calc(Agent):
    agent_id = "calc"

    @method
    def subtract(self, minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend


class Inbox:
    """What a subscriber agent received (readable from the test thread)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.arrived = threading.Event()
        self.lock = threading.Lock()

    def add(self, event: Any) -> None:
        with self.lock:
            self.events.append(event)
        self.arrived.set()


def listener(agent_id: str, subject: str, inbox: Inbox) -> type[Agent]:
    def on_event(self: Agent, event: Any) -> None:
        inbox.add(event)

    namespace = {"agent_id": agent_id, "on_event": subscribe(subject)(on_event)}
    return type(f"Listener_{agent_id.replace('-', '_')}", (Agent,), namespace)


def eventually(predicate: Callable[[], bool]) -> bool:
    """Whether ``predicate()`` became true within WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def sent_messages(server: ScriptedOpenAI, index: int) -> list[dict[str, Any]]:
    return list(server.requests[index]["messages"])


def contents(messages: list[dict[str, Any]]) -> str:
    return " | ".join(str(m.get("content")) for m in messages)


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


@pytest.fixture
def builder(llm_server: ScriptedOpenAI, store: InMemoryStore) -> Iterator[AgentBuilder]:
    client = llm_server.client()
    yield AgentBuilder("helper").llm(client).system_prompt("You help.").store(store)
    client.close()


@pytest.fixture
def bus() -> Iterator[Bus]:
    with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as running:
        yield running


def test_a_bus_client_chats_and_sessions_stay_apart(
    bus: Bus, builder: AgentBuilder, llm_server: ScriptedOpenAI, store: InMemoryStore
) -> None:
    bus.spawn(llm_agent_class(builder.build(), "helper"))
    client = bus.client()
    llm_server.reply("Hello Ann.")
    llm_server.reply("I do not know your name.")
    llm_server.reply("You are Ann.")

    assert client.request("helper", "chat", {"message": "I am Ann", "session_id": "a"}) == (
        "Hello Ann."
    )
    assert client.request("helper", "chat", ["Who am I?", "b"]) == "I do not know your name."
    assert client.request("helper", "chat", {"message": "Who am I?", "session_id": "a"}) == (
        "You are Ann."
    )
    assert "Ann" not in contents(sent_messages(llm_server, 1))  # session b saw nothing of a
    third = sent_messages(llm_server, 2)
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user"]
    assert third[1]["content"] == "I am Ann" and third[2]["content"] == "Hello Ann."
    assert sorted(store.keys()) == ["session:a", "session:b"]

    assert client.request("helper", "reset", {"session_id": "a"}) is True
    assert client.request("helper", "reset", {"session_id": "a"}) is False
    llm_server.reply("Nice to meet you.")
    client.request("helper", "chat", {"message": "Hi", "session_id": "a"})
    assert [m["role"] for m in sent_messages(llm_server, 3)] == ["system", "user"]


def test_bad_chat_params_are_json_rpc_errors(bus: Bus, builder: AgentBuilder) -> None:
    bus.spawn(llm_agent_class(builder.build(), "helper"))
    client = bus.client()
    for params in ({"message": 5}, {"message": "  "}, {"message": "hi", "session_id": ""}, {}):
        with pytest.raises(JsonRpcError) as info:
            client.request("helper", "chat", params)
        assert info.value.code == -32602, params


def test_streamed_chat_yields_tool_and_token_chunks_in_order(
    bus: Bus, builder: AgentBuilder, llm_server: ScriptedOpenAI
) -> None:
    def lookup(city: str) -> str:
        """Weather of a city."""
        return f"sunny in {city}"

    bus.spawn(llm_agent_class(builder.tool(lookup).build(), "helper"))
    [call_id] = llm_server.call_tools(("lookup", {"city": "Lyon"}))
    llm_server.reply("It is sunny in Lyon today.")

    chunks = list(bus.client().stream("helper", "chat/stream", {"message": "Weather in Lyon?"}))

    kinds = [chunk["type"] for chunk in chunks]
    assert kinds[:2] == ["tool_start", "tool_end"] and kinds[-1] == "done"
    assert set(kinds[2:-1]) == {"token"} and len(kinds) > 4  # the answer came in pieces
    assert chunks[0] == {"type": "tool_start", "tool_name": "lookup", "tool_call_id": call_id,
                         "turn": 1}  # fmt: skip
    assert chunks[1]["success"] is True
    text = "".join(chunk["text"] for chunk in chunks if chunk["type"] == "token")
    assert text == chunks[-1]["content"] == "It is sunny in Lyon today."
    assert {chunk["turn"] for chunk in chunks if chunk["type"] == "token"} == {2}
    assert chunks[-1]["turns_used"] == 2 and chunks[-1]["exit_reason"] == "stop"
    tool_message = next(m for m in sent_messages(llm_server, 1) if m["role"] == "tool")
    assert tool_message["content"] == "sunny in Lyon"


def test_max_turns_exceeded_is_a_json_rpc_error_with_the_checkpoint(
    bus: Bus, builder: AgentBuilder, llm_server: ScriptedOpenAI
) -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    bus.spawn(llm_agent_class(builder.tool(ping).max_turns(1).build(), "helper"))
    client = bus.client()
    llm_server.call_tools(("ping", {}))
    with pytest.raises(JsonRpcError) as info:
        client.request("helper", "chat", {"message": "go", "session_id": "s"})
    error = info.value
    assert (error.code, error.message) == (MAX_TURNS_EXCEEDED, "Max turns exceeded")
    assert error.data["maxTurns"] == 1
    checkpoint = error.data["checkpoint"]
    assert checkpoint["turn_count"] == 1 and checkpoint["conversation_id"] == "session:s"
    assert [m["role"] for m in checkpoint["conversation"]] == ["user", "assistant", "tool"]

    llm_server.call_tools(("ping", {}))
    stream = bus.client().stream("helper", "chat/stream", {"message": "again"})
    seen = []
    with pytest.raises(JsonRpcError) as info:
        for chunk in stream:
            seen.append(chunk["type"])
    assert info.value.code == MAX_TURNS_EXCEEDED
    assert seen == ["tool_start", "tool_end"]  # chunks before the error still arrive


def test_llm_failure_is_a_json_rpc_error(
    bus: Bus, llm_server: ScriptedOpenAI, store: InMemoryStore
) -> None:
    client = llm_server.client(max_retries=0)
    agent = AgentBuilder("helper").llm(client).store(store).build()
    bus.spawn(llm_agent_class(agent, "helper"))
    llm_server.fail(400, "model 'x' does not exist")
    with pytest.raises(JsonRpcError) as info:
        bus.client().request("helper", "chat", {"message": "hi"})
    assert info.value.code == LLM_FAILED
    assert "model 'x' does not exist" in info.value.data
    client.close()


def test_a_trigger_event_is_answered_on_the_output_topic(
    bus: Bus, builder: AgentBuilder, llm_server: ScriptedOpenAI, store: InMemoryStore
) -> None:
    inbox = Inbox()
    agent = llm_agent_class(
        builder.build(), "triage", subscribe=["tickets.*"], output_topic="answers.tickets"
    )
    bus.spawn(agent)
    bus.spawn(listener("desk", "answers.tickets", inbox))
    llm_server.reply("Send a technician.")
    event_id = bus.client().publish("tickets.created", {"ticket": 7, "text": "printer on fire"})

    assert inbox.arrived.wait(WAIT)
    [answer] = inbox.events
    assert answer.get_extension("collaborationid") == event_id
    data = answer.get_data()
    assert data["answer"] == "Send a technician."
    assert data["conversation"] == f"trigger:{event_id}"
    assert data["agent"] == "triage" and data["trigger"]["subject"] == "tickets.created"
    prompt = sent_messages(llm_server, 0)[-1]["content"]
    assert f"on tickets.created (id {event_id})" in prompt
    assert json.loads(prompt.split("\n", 1)[1]) == {"ticket": 7, "text": "printer on fire"}
    assert store.keys() == [f"trigger:{event_id}"]

    # A user session of the same agent starts empty: the trigger does not bleed into it.
    llm_server.reply("Hello.")
    bus.client().request("triage", "chat", {"message": "Hi", "session_id": "u"})
    assert "printer" not in contents(sent_messages(llm_server, 1))
    assert "trigger" not in agent.card()["methods"][0]["name"]
    assert agent.card()["subscriptions"] == ["tickets.*"]


def test_a_redelivered_trigger_reuses_its_stored_conversation(
    bus: Bus, builder: AgentBuilder, llm_server: ScriptedOpenAI, store: InMemoryStore
) -> None:
    inbox = Inbox()
    bus.spawn(llm_agent_class(builder.build(), "triage", subscribe=["t"], output_topic="out"))
    bus.spawn(listener("desk", "out", inbox))
    # As if a first delivery had answered, then crashed before acknowledging.
    store.save("trigger:ev-1", [LlmMessage.user("earlier prompt"), LlmMessage.assistant("Done.")])
    # As if a first delivery had been cut short after the prompt was stored.
    store.save("trigger:ev-2", [LlmMessage.user("earlier prompt")])
    llm_server.reply("Finished now.")
    client = bus.client()
    client.publish("t", {"n": 1}, id="ev-1")
    client.publish("t", {"n": 2}, id="ev-2")

    assert eventually(lambda: len(inbox.events) == 2)
    answers = {e.get_extension("collaborationid"): e.get_data() for e in inbox.events}
    assert answers["ev-1"]["answer"] == "Done." and answers["ev-2"]["answer"] == "Finished now."
    assert len(llm_server.requests) == 1  # ev-1 was not asked again
    assert [m["content"] for m in sent_messages(llm_server, 0)[1:]] == ["earlier prompt"]


async def test_a_failed_trigger_run_is_dead_lettered_with_the_reason(
    llm_server: ScriptedOpenAI, store: InMemoryStore
) -> None:
    client = llm_server.client()
    loop = AgentBuilder("t").llm(client).store(store).max_turns(1).tool(_ping).build()
    letters: list[Delivery] = []
    async with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as bus:
        await bus.aspawn(llm_agent_class(loop, "triage", subscribe=["t"]))
        dlq = await bus.transport.subscribe(
            [bus.topics.dlq], "dlq-reader", _collect(letters), from_beginning=True
        )
        llm_server.call_tools(("ping", {}))
        event_id = await bus.async_client().publish("t", "go")
        await asyncio.wait_for(_until(lambda: bool(letters)), WAIT)
        await dlq.stop()
    client.close()
    [letter] = letters
    assert letter.event.get_id() == event_id
    reason = dict(letter.headers)[DLQ_REASON].decode()
    assert reason == f"handler-error: {MAX_TURNS_EXCEEDED} Max turns exceeded"


def _ping() -> str:
    """Ping."""
    return "pong"


async def _until(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


def _collect(letters: list[Delivery]) -> Callable[[Delivery], Awaitable[None]]:
    async def on_letter(delivery: Delivery) -> None:
        letters.append(delivery)

    return on_letter


def test_an_llm_tool_calls_another_agent_over_the_bus(
    bus: Bus, builder: AgentBuilder, llm_server: ScriptedOpenAI
) -> None:
    bus.spawn(Calc)
    agent = llm_agent_class(builder.build(), "helper", bus_tools=["call_agent", "publish"])
    bus.spawn(agent)
    args = {"agent": "calc", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}}
    llm_server.call_tools(("call_agent", args))
    llm_server.call_tools(
        ("call_agent", {"agent": "calc", "method": "divide", "params": [1, 2]}),
        ("call_agent", {"agent": "helper", "method": "chat", "params": ["loop"]}),
    )
    llm_server.reply("42 - 23 = 19")

    assert bus.client().request("helper", "chat", {"message": "42 - 23?"}) == "42 - 23 = 19"

    first = [m for m in sent_messages(llm_server, 1) if m["role"] == "tool"]
    assert [m["content"] for m in first] == ["19"]
    tools = [m["content"] for m in sent_messages(llm_server, 2) if m["role"] == "tool"]
    unknown, itself = tools[1:]
    assert unknown.startswith("error: tool 'call_agent' failed:")
    assert "calc.divide answered error -32601" in unknown
    assert "cannot call itself" in itself
    offered = {tool["function"]["name"] for tool in llm_server.requests[0]["tools"]}
    assert offered == {"call_agent", "publish"}


def test_the_publish_tool_puts_an_event_on_the_bus(
    bus: Bus, builder: AgentBuilder, llm_server: ScriptedOpenAI
) -> None:
    inbox = Inbox()
    bus.spawn(listener("audit", "audit.notes", inbox))
    bus.spawn(llm_agent_class(builder.build(), "helper", bus_tools=["publish"]))
    llm_server.call_tools(("publish", {"topic": "audit.notes", "data": {"note": "checked"}}))
    llm_server.call_tools(("publish", {"topic": "bad topic!", "data": 1}))
    llm_server.reply("Noted.")

    assert bus.client().request("helper", "chat", {"message": "note it"}) == "Noted."
    assert inbox.arrived.wait(WAIT)
    assert [event.get_data() for event in inbox.events] == [{"note": "checked"}]
    published = json.loads(
        next(m for m in sent_messages(llm_server, 1) if m["role"] == "tool")["content"]
    )
    assert published == {"published": inbox.events[0].get_id(), "topic": "audit.notes"}
    bad = [m for m in sent_messages(llm_server, 2) if m["role"] == "tool"][-1]["content"]
    assert bad.startswith("error:") and "invalid subject" in bad


def test_the_read_topic_tool_pages_through_a_topic(
    bus: Bus, builder: AgentBuilder, llm_server: ScriptedOpenAI
) -> None:
    client = bus.client()
    ids = [client.publish("audit.log", {"n": n}) for n in range(3)]
    bus.spawn(llm_agent_class(builder.build(), "helper", bus_tools=["read_topic"]))
    llm_server.call_tools(("read_topic", {"topic": "audit.log", "limit": 2}))

    def next_page(body: dict[str, Any]) -> Completion:
        cursor = json.loads(body["messages"][-1]["content"])["cursor"]
        call = {
            "name": "read_topic",
            "arguments": json.dumps({"topic": "audit.log", "cursor": cursor}),
        }
        return Completion(
            None, [{"id": "call_next", "type": "function", "function": call}], "tool_calls"
        )

    llm_server.respond_with(next_page)
    llm_server.call_tools(
        ("read_topic", {"topic": "audit.*"}),
        ("read_topic", {"topic": "audit.log", "limit": 500}),
    )
    llm_server.reply("Three entries.")

    assert client.request("helper", "chat", {"message": "what is in the log?"}) == "Three entries."
    results = [
        [m["content"] for m in sent_messages(llm_server, i) if m["role"] == "tool"][-1]
        for i in (1, 2)
    ]
    first, second = (json.loads(text) for text in results)
    events = first["events"] + second["events"]
    # In memory the merge follows the order of publishing exactly.
    assert [(e["id"], e["data"], e["subject"]) for e in events] == [
        (ids[n], {"n": n}, "audit.log") for n in range(3)
    ]
    assert [len(first["events"]), len(second["events"])] == [2, 1]
    assert first["undecodable"] == second["undecodable"] == 0
    wildcard, too_many = [
        m["content"] for m in sent_messages(llm_server, 3) if m["role"] == "tool"
    ][-2:]
    assert wildcard.startswith("error: tool 'read_topic' failed:") and "wildcards" in wildcard
    assert "limit must be from 1 to 100" in too_many


def test_invalid_bus_configuration_fails_when_the_class_is_made(builder: AgentBuilder) -> None:
    loop = builder.build()
    with pytest.raises(AgentConfigError, match="invalid agent id"):
        llm_agent_class(loop, "has space")
    with pytest.raises(AgentConfigError, match="answer its own answers"):
        llm_agent_class(loop, "a", subscribe=["news.#"], output_topic="news.answers")
    with pytest.raises(AgentConfigError, match="needs subscribe"):
        llm_agent_class(loop, "a", output_topic="out")
    with pytest.raises(AgentConfigError, match="unknown bus tool 'delete_topic'"):
        llm_agent_class(loop, "a", bus_tools=["delete_topic"])
    assert len(loop.tools) == 0  # the caller's loop is left as it was


AGENT_FILE = """\
name: Help Desk
id: help-desk
description: Answers tickets
model: file-model
max_turns: 3
subscribe: [tickets.created]
output_topic: tickets.answered
bus_tools: true
"""


def test_agent_class_from_file(tmp_path: Path, llm_server: ScriptedOpenAI) -> None:
    path = tmp_path / "desk.agent.yaml"
    path.write_text(AGENT_FILE)
    client = llm_server.client()
    cls = agent_class_from_file(path, {"tenant": "acme"}, client=client)
    card = cls.card()
    assert (card["id"], card["description"]) == ("help-desk", "Answers tickets")
    assert [m["name"] for m in card["methods"]] == ["chat", "chat/stream", "reset"]
    assert card["subscriptions"] == ["tickets.created"]
    assert cls.loop.tools.names() == ["publish", "call_agent", "read_topic"]
    assert (cls.loop.max_turns, cls.loop.model, cls.output_topic) == (
        3,
        "file-model",
        "tickets.answered",
    )
    client.close()

    (tmp_path / "stem.agent.yaml").write_text("model: m\n")
    assert agent_class_from_file(tmp_path / "stem.agent.yaml", client=client).agent_id == "stem"
    (tmp_path / "bad.agent.yaml").write_text("name: Help Desk\nmodel: m\n")
    with pytest.raises(AgentConfigError, match="add an id: keyword"):
        agent_class_from_file(tmp_path / "bad.agent.yaml", client=client)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("id: two words\n", ":2: id: invalid agent id"),
        ("subscribe: [ok, 'no spaces']\n", ":2: subscribe.1: invalid subject"),
        ("subscribe: a.*\noutput_topic: a.b\n", ":3: output_topic: matches subscribe 'a.*'"),
        ("output_topic: out\n", ":2: output_topic: needs subscribe"),
        ("bus_tools: [publish, drop]\n", ":2: bus_tools.1: unknown bus tool 'drop'"),
        ("bus_tools: [publish, publish]\n", ":2: bus_tools.1: 'publish' is listed twice"),
        (
            "tools:\n  publish:\n    callable: os.path:join\nbus_tools: [publish]\n",
            ":5: bus_tools.0: 'publish' is also the name of a tool in tools:",
        ),
    ],
)
def test_agent_file_bus_keywords_are_checked(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "x.agent.yaml"
    path.write_text("model: m\n" + text)
    with pytest.raises(AgentFileError) as info:
        agent_class_from_file(path)
    assert problem in str(info.value)


@pytest.mark.kafka
def test_chat_and_trigger_over_kafka(
    kafka_bootstrap: str, builder: AgentBuilder, llm_server: ScriptedOpenAI
) -> None:
    inbox = Inbox()
    prefix = f"t{uuid.uuid4().hex[:10]}"
    bus = Bus.kafka(
        kafka_bootstrap,
        bus_options={"prefix": prefix, "request_timeout": WAIT, "heartbeat": 60.0},
        metadata_max_age_ms=1000,
    )
    bus.spawn(llm_agent_class(builder.build(), "helper", subscribe=["in"], output_topic="out"))
    bus.spawn(listener("sink", "out", inbox))
    with bus:
        llm_server.reply("Hi over Kafka.")
        assert bus.client().request("helper", "chat", {"message": "hi", "session_id": "k"}) == (
            "Hi over Kafka."
        )
        llm_server.reply("Event handled.")
        event_id = bus.client().publish("in", "something happened")
        assert inbox.arrived.wait(WAIT)
    [answer] = inbox.events
    assert answer.get_data()["answer"] == "Event handled."
    assert answer.get_extension("collaborationid") == event_id


def test_a_redelivered_trigger_that_its_exit_condition_ended_is_not_run_again(
    llm_server: ScriptedOpenAI, store: InMemoryStore
) -> None:
    escalated: list[str] = []

    def escalate(reason: str) -> str:
        """Hand the ticket to a person."""
        escalated.append(reason)
        return "queued"

    client = llm_server.client()
    loop = (
        AgentBuilder("t")
        .llm(client)
        .store(store)
        .tool(escalate)
        .exit_condition('tool_call("escalate")')
        .build()
    )
    llm_server.call_tools(("escalate", {"reason": "fire"}))
    answers = []
    # The second delivery of the event reaches a new bus sharing the store: another
    # process after the first crashed before acknowledging.
    for _ in range(2):
        inbox = Inbox()
        with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as bus:
            bus.spawn(llm_agent_class(loop, "triage", subscribe=["t"], output_topic="out"))
            bus.spawn(listener("desk", "out", inbox))
            bus.client().publish("t", {"ticket": 7}, id="ev-1")
            assert eventually(lambda inbox=inbox: len(inbox.events) == 1)  # type: ignore[misc]
        answers.append(inbox.events[0].get_data()["answer"])
    client.close()
    assert escalated == ["fire"]  # the tool ran once
    assert len(llm_server.requests) == 1  # the model was not asked again
    assert answers == ["", ""]  # the same answer both times
