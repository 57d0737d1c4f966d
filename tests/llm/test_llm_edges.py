"""LLM agents at the edges: a max-turns error too large to travel, and a server's
answer that does not parse. The only fake is the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_bus import Bus, JsonRpcError
from a2a_bus.core.payload import MAX_PAYLOAD_BYTES
from a2a_bus.llm import AgentBuilder, AgentLoop, Done, SqliteStore, Token, llm_agent_class
from a2a_bus.llm.bus_agent import LLM_FAILED, MAX_TURNS_EXCEEDED
from a2a_bus.llm.errors import LlmError
from a2a_bus.llm.openai_wire import StreamAssembler
from a2a_bus.protocol import ErrorCode

from .conftest import Completion, ScriptedOpenAI, sse

WAIT = 20.0  # upper bound on any wait; never a performance assertion


@pytest.fixture
def bus() -> Iterator[Bus]:
    with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as running:
        yield running


def _big_tool_loop(llm_server: ScriptedOpenAI) -> AgentLoop:
    """An agent whose one tool returns 600 kB, allowed two turns."""

    def fetch_report() -> str:
        """The full report."""
        return "x" * 600_000

    client = llm_server.client(max_retries=0)
    loop = AgentBuilder("helper").llm(client).tool(fetch_report).max_turns(2).build()
    llm_server.call_tools(("fetch_report", {}))
    llm_server.call_tools(("fetch_report", {}))
    return loop


def _assert_carried(error: JsonRpcError) -> None:
    if error.code == ErrorCode.TOO_LARGE:
        return
    assert error.code == MAX_TURNS_EXCEEDED, (error.code, error.message)
    size = len(json.dumps(error.data))
    assert size <= MAX_PAYLOAD_BYTES, f"error data is {size} bytes"


def test_max_turns_error_data_stays_within_the_payload_bound(
    bus: Bus, llm_server: ScriptedOpenAI
) -> None:
    """-32020 carries the conversation as ``data.checkpoint``: two 600 kB tool
    results made a 1.8 MB error, over the bound of every transport. The caller gets
    -32020 with its data left out (and why) instead."""
    bus.spawn(llm_agent_class(_big_tool_loop(llm_server), "helper"))
    with pytest.raises(JsonRpcError) as info:
        bus.client().request("helper", "chat", {"message": "summarise the report"})
    _assert_carried(info.value)


def test_max_turns_error_with_a_large_checkpoint_reaches_the_caller_over_kafka(
    kafka_bootstrap: str, llm_server: ScriptedOpenAI
) -> None:
    """Over Kafka the oversized -32020 answer was never delivered (over the 1 MiB
    record limit): the caller waited out its timeout. It is answered as in memory."""
    loop = _big_tool_loop(llm_server)
    bus = Bus.kafka(
        kafka_bootstrap,
        bus_options={
            "prefix": f"t{uuid.uuid4().hex[:10]}",
            "request_timeout": 10.0,
            "heartbeat": 60.0,
        },
        metadata_max_age_ms=1000,
    )
    bus.spawn(llm_agent_class(loop, "helper"))
    with bus, pytest.raises(JsonRpcError) as info:
        bus.client().request("helper", "chat", {"message": "summarise the report"})
    _assert_carried(info.value)


def _ask(bus: Bus, method: str) -> Any:
    """The agent's answer to one message, by ``chat`` or ``chat/stream``."""
    if method == "chat":
        return bus.client().request("helper", "chat", {"message": "hi"})
    return list(bus.client().stream("helper", "chat/stream", {"message": "hi"}))


def _spawn_helper(bus: Bus, llm_server: ScriptedOpenAI) -> None:
    loop = AgentBuilder("helper").llm(llm_server.client(max_retries=0)).build()
    bus.spawn(llm_agent_class(loop, "helper"))


@pytest.mark.parametrize("method", ["chat", "chat/stream"])
@pytest.mark.parametrize(
    "usage", [("many", "few"), (-5, 7), (11, 1e300)], ids=["not-numbers", "negative", "huge"]
)
def test_malformed_usage_from_the_llm_server_is_an_llm_failure(
    bus: Bus, llm_server: ScriptedOpenAI, method: str, usage: tuple[Any, Any]
) -> None:
    """``usage`` token counts that are not counts (a misbehaving proxy) are a
    malformed answer: -32021 after one call, not a crash that re-runs the message
    (calling the paid LLM again) or an answer the bus cannot carry."""
    for _ in range(4):  # enough for every re-run a crash makes
        llm_server.respond_with(lambda body: Completion("Hello.", usage=usage))
    _spawn_helper(bus, llm_server)
    with pytest.raises(JsonRpcError) as info:
        _ask(bus, method)
    assert (info.value.code, info.value.message) == (LLM_FAILED, "LLM call failed")
    assert "malformed usage" in str(info.value.data)
    assert len(llm_server.requests) == 1


def _completion(message: dict[str, Any]) -> str:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
    return json.dumps({"id": "chatcmpl-raw", "object": "chat.completion", "choices": [choice]})


def _tool_calls(*calls: Any) -> str:
    return _completion({"content": None, "tool_calls": list(calls)})


MALFORMED_COMPLETIONS = {
    "tool-calls-not-an-array": _completion({"content": None, "tool_calls": "nope"}),
    "tool-call-not-an-object": _tool_calls(5),
    "function-not-an-object": _tool_calls({"id": "c1", "type": "function", "function": "x"}),
    "tool-name-not-text": _tool_calls({"id": "c1", "function": {"name": 7, "arguments": "{}"}}),
    "content-not-text": _completion({"content": 12345}),
    "nested-too-deeply": _completion({"content": "x"})[:-1]
    + ', "x": '
    + "[" * 100_000
    + "]" * 100_000
    + "}",
}


@pytest.mark.parametrize("method", ["chat", "chat/stream"])
@pytest.mark.parametrize("body", MALFORMED_COMPLETIONS.values(), ids=MALFORMED_COMPLETIONS)
def test_a_malformed_completion_is_an_llm_failure(
    bus: Bus, llm_server: ScriptedOpenAI, method: str, body: str
) -> None:
    """A completion of the wrong shape (a server that ignores ``stream`` answers
    ``chat/stream`` with one too) is -32021 after one call, not a crash."""
    for _ in range(4):  # enough for every re-run a crash makes
        llm_server.send_raw(body)
    _spawn_helper(bus, llm_server)
    with pytest.raises(JsonRpcError) as info:
        _ask(bus, method)
    assert (info.value.code, info.value.message) == (LLM_FAILED, "LLM call failed")
    assert "malformed chat completion" in str(info.value.data)
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize(
    "chunk",
    [
        {"choices": [{"delta": {"tool_calls": [{"index": None}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": 7}}]}}]},
        {"choices": ["not an object"]},
        {"usage": {"prompt_tokens": "many"}},
        {"usage": {"prompt_tokens": -5}},
        {"choices": [{"delta": {"content": 12345}}]},
        '{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=[
        "index-null",
        "name-not-text",
        "choice-not-object",
        "usage-not-numbers",
        "usage-negative",
        "content-not-text",
        "nested-too-deeply",
    ],
)
def test_a_malformed_stream_chunk_is_an_llm_error(chunk: dict[str, object] | str) -> None:
    assembler = StreamAssembler()
    with pytest.raises(LlmError, match="malformed"):
        assembler.feed(chunk if isinstance(chunk, str) else json.dumps(chunk))


@pytest.mark.parametrize("method", ["chat", "chat/stream"])
def test_half_a_character_in_an_answer_becomes_a_replacement_character(
    bus: Bus, llm_server: ScriptedOpenAI, tmp_path: Path, method: str
) -> None:
    """JSON can escape half a character (a lone surrogate), which no UTF-8 text can
    carry: the bus refused the answer (-32603), and a SQLite store crashed the actor,
    which asked the model again. The half character becomes U+FFFD."""
    for _ in range(4):  # enough for every re-run a crash makes
        llm_server.send_raw(_completion({"content": "ok \ud83d"}))
    store = SqliteStore(tmp_path / "conversations.db")
    loop = AgentBuilder("helper").llm(llm_server.client(max_retries=0)).store(store).build()
    bus.spawn(llm_agent_class(loop, "helper"))
    params = {"message": "hi", "session_id": "s"}
    if method == "chat":
        answer = bus.client().request("helper", "chat", params)
    else:
        answer = list(bus.client().stream("helper", "chat/stream", params))[-1]["content"]
    assert answer == "ok \ufffd"
    assert [m.content for m in store.load("session:s")] == ["hi", "ok \ufffd"]
    assert len(llm_server.requests) == 1
    store.close()


def test_half_a_character_in_a_tool_result_reaches_the_model_replaced(
    llm_server: ScriptedOpenAI,
) -> None:
    """A tool's text (decoded from JSON, say) may hold half a character too: the next
    request could not be encoded, and the run failed outside the LLM errors."""

    def echo() -> str:
        """Text as a tool may have decoded it."""
        return "half \ud800"

    llm_server.call_tools(("echo", {}))
    llm_server.reply("done")
    output = AgentLoop(llm_server.client(max_retries=0), tools=[echo]).run("hi")
    assert output.content == "done"
    assert llm_server.requests[1]["messages"][-1]["content"] == "half \ufffd"


def test_a_character_split_across_stream_chunks_is_whole_in_the_answer(
    llm_server: ScriptedOpenAI,
) -> None:
    """Each token is well-formed text; the answer joins the halves of a character."""
    llm_server.send_raw(
        sse(
            {"choices": [{"delta": {"content": "smile \ud83d"}}]},
            {"choices": [{"delta": {"content": "\ude00"}, "finish_reason": "stop"}]},
        ),
        "text/event-stream",
    )
    chunks = list(AgentLoop(llm_server.client(max_retries=0)).stream("hi"))
    assert [c.text for c in chunks if isinstance(c, Token)] == ["smile \ufffd", "\ufffd"]
    assert isinstance(chunks[-1], Done) and chunks[-1].output.content == "smile \U0001f600"


def test_an_error_body_with_status_200_is_an_llm_error_with_the_servers_message(
    llm_server: ScriptedOpenAI,
) -> None:
    """Some proxies answer a failure with HTTP 200 and ``{"error": {...}}``; streamed
    answers already report such an error's message, plain answers must too."""
    llm_server.fail(200, "You exceeded your current quota")
    with pytest.raises(LlmError) as info:
        AgentLoop(llm_server.client(max_retries=0)).run("hi")
    assert "You exceeded your current quota" in str(info.value)
