"""The agent loop against the scripted server: tool rounds, concurrency, errors, exits,
listeners, streaming and checkpoints."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from a2a_bus.llm import (
    AgentCheckpoint,
    AgentListener,
    AgentLoop,
    CallbackContext,
    Done,
    ExitConditionError,
    MaxTurnsExceeded,
    OpenAIClient,
    Token,
    ToolContext,
    ToolEnd,
    ToolStart,
    tool,
)
from a2a_bus.llm.dispatch import ToolResult
from a2a_bus.llm.exit import ExitCondition
from a2a_bus.llm.messages import ChatResponse, LlmMessage, ToolCall

from .conftest import ScriptedOpenAI

pytestmark = pytest.mark.timeout(60)


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


@tool
async def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_several_tool_calls_in_one_turn_answer_in_call_order(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    ids = llm_server.call_tools(
        ("add", {"a": 1, "b": 2}), ("shout", {"text": "hi"}), ("add", {"a": 40, "b": 2})
    )
    llm_server.reply("1+2=3, HI, 42")
    agent = AgentLoop(llm_client, tools=[add, shout], system_prompt="You compute.")
    output = agent.run("compute things")
    assert output.content == "1+2=3, HI, 42"
    assert output.turns_used == 2 and output.finish_reason == "stop"
    second = llm_server.requests[1]
    assert second["messages"][0] == {"role": "system", "content": "You compute."}
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages(second)] == [
        (ids[0], "3"),
        (ids[1], "HI"),
        (ids[2], "42"),
    ]
    assert output.tool_results == {ids[0]: 3, ids[1]: "HI", ids[2]: 42}
    assert llm_server.requests[0]["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]


@pytest.mark.parametrize("cap", [1, 2, None])
def test_tool_concurrency_is_capped(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient, cap: int | None
) -> None:
    active = peak = 0

    @tool
    async def slow(n: int) -> int:
        """Work a little."""
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.02)
        active -= 1
        return n

    llm_server.call_tools(*[("slow", {"n": i}) for i in range(5)])
    llm_server.reply("done")
    AgentLoop(llm_client, tools=[slow], max_tool_concurrency=cap).run("go")
    assert peak == (cap or 5)


def test_sync_tools_run_concurrently_in_threads(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    barrier = threading.Barrier(3, timeout=10)  # breaks unless all three run at once

    @tool
    def meet(n: int) -> int:
        """Wait for the others."""
        barrier.wait()
        return n

    llm_server.call_tools(*[("meet", {"n": i}) for i in range(3)])
    llm_server.reply("met")
    output = AgentLoop(llm_client, tools=[meet]).run("go")
    assert sorted(output.tool_results.values()) == [0, 1, 2]


def test_bad_tool_calls_are_fed_back_to_the_model(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"kaput: {reason}")

    @tool
    def leave(code: int) -> str:
        """Exits, as a command-line parser does on bad arguments."""
        sys.exit(code)

    llm_server.call_tools(
        ("nope", {}),
        ("add", "{not json"),
        ("add", {"a": "x", "b": 1}),
        ("add", {"a": 1}),
        ("explode", {"reason": "test"}),
        ("add", "[1, 2]"),
        ("leave", {"code": 2}),
    )
    llm_server.reply("sorry")
    output = AgentLoop(llm_client, tools=[add, explode, leave]).run("try")
    assert output.content == "sorry"
    contents = [m["content"] for m in tool_messages(llm_server.requests[1])]
    assert contents[0].startswith("error: unknown tool 'nope'") and "add, explode" in contents[0]
    assert contents[6] == "error: tool 'leave' failed: SystemExit: 2"
    assert "not valid JSON" in contents[1]
    assert "a: 'x' is not of type 'integer'" in contents[2]
    assert "'b' is a required property" in contents[3]
    assert contents[4] == "error: tool 'explode' failed: RuntimeError: kaput: test"
    assert "must be a JSON object" in contents[5]


def test_exit_condition_stops_after_the_tool_round(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    @tool
    def escalate(reason: str) -> str:
        """Hand over to a human."""
        return "ticket T-1"

    llm_server.call_tools(("escalate", {"reason": "angry customer"}), content="Escalating.")
    exits = ExitRecorder()
    agent = AgentLoop(
        llm_client,
        tools=[escalate],
        listeners=[exits],
        exit_condition='finish_reason == "stop" || tool_call("escalate")',
    )
    output = agent.run("I want a human")
    assert len(llm_server.requests) == 1  # no further model call
    assert output.finish_reason == "tool_calls"  # the provider's reason, unchanged
    assert output.exit_reason == "exit_condition" and exits.reasons == ["exit_condition"]
    assert output.content == "Escalating."
    assert list(output.tool_results.values()) == ["ticket T-1"]


def test_exit_condition_that_never_holds_runs_into_max_turns(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    for i in range(3):
        llm_server.call_tools(("add", {"a": i, "b": 1}))
    exits = ExitRecorder()
    agent = AgentLoop(
        llm_client,
        tools=[add],
        max_turns=3,
        listeners=[exits],
        exit_condition='tool_results["missing"] == 1 && turn > 0',
    )
    with pytest.raises(MaxTurnsExceeded) as info:
        agent.run("loop forever")
    assert exits.reasons == ["max_turns"]
    checkpoint = info.value.checkpoint
    assert checkpoint.turn_count == 3
    assert [m.role for m in checkpoint.conversation] == ["user"] + ["assistant", "tool"] * 3
    assert list(checkpoint.tool_results.values()) == [3]


def test_exit_condition_over_tool_results_and_content(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    llm_server.call_tools(("add", {"a": 1, "b": 1}))
    llm_server.call_tools(("add", {"a": 20, "b": 22}))
    agent = AgentLoop(
        llm_client, tools=[add], exit_condition='tool_results["add"] == 42 and turn == 2'
    )
    output = agent.run("reach 42")
    assert output.turns_used == 2 and output.exit_reason == "exit_condition"


def test_an_exit_condition_sees_a_turn_s_calls_results_and_conversation() -> None:
    """What a turn hands the condition: each call with its arguments parsed (kept as
    text when they are not JSON), each result by tool name, the messages as dicts."""
    calls = (ToolCall("c1", "add", '{"a": 1}'), ToolCall("c2", "shout", "not json"))
    response = ChatResponse(LlmMessage.assistant(None, tool_calls=calls), "tool_calls")
    results = [ToolResult(calls[0], True, 42, "42", 1.0)]
    messages = [LlmMessage.user("hi")]
    condition = ExitCondition(
        'tool_calls[0]["arguments"]["a"] == 1 and tool_calls[1]["arguments"] == "not json"'
        ' and tool_results["add"] == 42 and messages[0]["content"] == "hi"'
        ' and finish_reason == "tool_calls" and turn == 3'
    )
    assert condition.reached(response, 3, results, messages)
    assert not condition.reached(response, 2, results, messages)
    assert not condition.reached(response, 3, [], messages)


def test_invalid_exit_condition_fails_at_build_time(llm_client: OpenAIClient) -> None:
    with pytest.raises(ExitConditionError, match="unknown name 'finish'"):
        AgentLoop(llm_client, exit_condition='finish == "stop"')
    with pytest.raises(ExitConditionError, match="invalid exit_condition"):
        AgentLoop(llm_client, exit_condition="turn >")


class ExitRecorder(AgentListener):
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def on_loop_exited(self, context: CallbackContext, payload: Any) -> None:
        self.reasons.append(payload.exit_reason)


class Recorder(AgentListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_turn_started(self, context: CallbackContext, payload: Any) -> None:
        self.events.append(("turn", payload))

    def on_llm_called(self, context: CallbackContext, payload: Any) -> None:
        self.events.append(("llm", payload))

    def on_tool_dispatched(self, context: CallbackContext, payload: Any) -> None:
        self.events.append(("dispatched", payload))

    def on_tool_completed(self, context: CallbackContext, payload: Any) -> None:
        self.events.append(("completed", payload))

    def on_loop_exited(self, context: CallbackContext, payload: Any) -> None:
        self.events.append(("exited", payload))


class Broken(AgentListener):
    def on_turn_started(self, context: CallbackContext, payload: Any) -> None:
        raise RuntimeError("listener bug")


def test_listener_callbacks_fire_in_order_with_their_payloads(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    ids = llm_server.call_tools(("add", {"a": 2, "b": 3}))
    llm_server.reply("5", usage=(30, 2))
    recorder = Recorder()
    AgentLoop(llm_client, tools=[add], max_tool_concurrency=1, listeners=[Broken(), recorder]).run(
        "2+3?"
    )
    kinds = [kind for kind, _ in recorder.events]
    assert kinds == ["turn", "llm", "dispatched", "completed", "turn", "llm", "exited"]
    payloads = dict(recorder.events[:4])
    assert payloads["turn"].turn == 1 and payloads["turn"].message_count == 1
    assert (
        payloads["llm"].model == "scripted-model" and payloads["llm"].finish_reason == "tool_calls"
    )
    assert payloads["dispatched"].tool_call_id == ids[0]
    assert json.loads(payloads["dispatched"].arguments_json) == {"a": 2, "b": 3}
    assert payloads["completed"].success and payloads["completed"].result_summary == "5"
    exited = recorder.events[-1][1]
    assert (exited.total_turns, exited.total_llm_calls, exited.exit_reason) == (2, 2, "stop")
    assert exited.total_llm_tokens == 11 + 7 + 30 + 2


def test_stream_yields_tokens_tool_chunks_and_done(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    ids = llm_server.call_tools(
        ("add", {"a": 1, "b": 1}), ("shout", {"text": "x"}), content="Let me see"
    )
    llm_server.reply("Both done now")
    chunks = list(AgentLoop(llm_client, tools=[add, shout]).stream("go"))
    assert isinstance(chunks[-1], Done) and chunks[-1].output.content == "Both done now"
    text_turn1 = "".join(c.text for c in chunks if isinstance(c, Token) and c.turn == 1)
    text_turn2 = "".join(c.text for c in chunks if isinstance(c, Token) and c.turn == 2)
    assert (text_turn1, text_turn2) == ("Let me see", "Both done now")
    starts = [c.tool_call_id for c in chunks if isinstance(c, ToolStart)]
    ends = [(c.tool_call_id, c.success) for c in chunks if isinstance(c, ToolEnd)]
    assert sorted(starts) == sorted(ids) and sorted(ends) == sorted((i, True) for i in ids)
    first_end = next(i for i, c in enumerate(chunks) if isinstance(c, ToolEnd))
    start_of = {c.tool_call_id: i for i, c in enumerate(chunks) if isinstance(c, ToolStart)}
    end_of = {c.tool_call_id: i for i, c in enumerate(chunks) if isinstance(c, ToolEnd)}
    assert all(start_of[i] < end_of[i] for i in ids) and first_end > 0
    assert all(llm_server.requests[i]["stream"] for i in range(2))


async def test_async_run_and_async_stream(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    agent = AgentLoop(llm_client, tools=[add])
    llm_server.call_tools(("add", {"a": 4, "b": 4}))
    llm_server.reply("eight")
    output = await asyncio.wait_for(agent.arun("4+4"), 20)
    assert output.content == "eight" and list(output.tool_results.values()) == [8]
    llm_server.reply("streamed")
    chunks = [c async for c in agent.astream("again")]
    assert isinstance(chunks[-1], Done) and chunks[-1].output.content == "streamed"
    assert any(isinstance(c, Token) for c in chunks)
    await llm_client.aclose()


def test_sync_run_inside_an_event_loop_is_refused(llm_client: OpenAIClient) -> None:
    agent = AgentLoop(llm_client)

    async def misuse() -> None:
        agent.run("hi")

    with pytest.raises(RuntimeError, match="use its async twin"):
        asyncio.run(misuse())


EXIT_MID_RUN = """
import asyncio, threading
from a2a_bus.llm import AgentLoop, ScriptedClient

asked = threading.Event()

class Slow(ScriptedClient):
    async def achat(self, *args, **kwargs):
        asked.set()
        await asyncio.sleep(60)

agent = AgentLoop(Slow(["never"]))
threading.Thread(target=agent.run, args=("hi",), daemon=True).start()
asked.wait(30)
"""


def test_a_process_exits_cleanly_while_a_thread_is_in_a_sync_run(tmp_path: Path) -> None:
    """A thread still in ``run()`` at exit (a bus stop gave up on its handler) keeps
    its running loop: closing it at exit failed with a traceback."""
    script = tmp_path / "exit_mid_run.py"
    script.write_text(textwrap.dedent(EXIT_MID_RUN))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_checkpoint_is_json_and_resumes_the_conversation(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    llm_server.call_tools(("add", {"a": 1, "b": 2}))
    llm_server.call_tools(("add", {"a": 3, "b": 4}))
    agent = AgentLoop(llm_client, tools=[add], max_turns=2, system_prompt="sys")
    with pytest.raises(MaxTurnsExceeded) as info:
        agent.run("sum things")
    persisted = info.value.checkpoint.to_json()
    restored = AgentCheckpoint.from_json(persisted)
    assert restored == info.value.checkpoint

    llm_server.reply("the sums are 3 and 7")
    output = agent.resume(restored, "and the answer?")
    assert output.content == "the sums are 3 and 7"
    resumed_request = llm_server.requests[-1]["messages"]
    assert [m["role"] for m in resumed_request] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
    ]
    assert output.turns_used == 1 and output.checkpoint.turn_count == 3
    assert AgentCheckpoint.from_json(output.checkpoint.to_json()).conversation[-1].content == (
        "the sums are 3 and 7"
    )


def test_invalid_checkpoint_json_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="invalid agent checkpoint"):
        AgentCheckpoint.from_json('{"conversation": 3}')


def test_tools_receive_context_and_conversation(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    seen: list[ToolContext] = []

    @tool
    def whoami(context: ToolContext) -> str:
        """Who is asking."""
        seen.append(context)
        return str(context.context["user"])

    llm_server.call_tools(("whoami", {}))
    llm_server.reply("you are ada")
    agent = AgentLoop(llm_client, tools=[whoami], name="helper", context={"user": "bob"})
    agent.run("who am I?", conversation="c-1", context={"user": "ada"})
    assert seen[0].agent == "helper" and seen[0].conversation == "c-1" and seen[0].turn == 1
    assert tool_messages(llm_server.requests[1])[0]["content"] == "ada"
    assert llm_server.requests[0]["tools"][0]["function"]["parameters"]["properties"] == {}


def test_tool_timeout_is_reported_to_the_model(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    @tool
    async def hang() -> str:
        """Never finishes."""
        await asyncio.Event().wait()
        return "unreachable"

    llm_server.call_tools(("hang", {}))
    llm_server.reply("gave up")
    output = AgentLoop(llm_client, tools=[hang], tool_timeout=0.05).run("wait")
    assert output.content == "gave up"
    assert "timed out" in tool_messages(llm_server.requests[1])[0]["content"]


def test_empty_prompt_is_refused(llm_client: OpenAIClient) -> None:
    with pytest.raises(ValueError, match="nothing to answer"):
        AgentLoop(llm_client).run()


@pytest.mark.parametrize("tool_timeout", [None, 5.0])
def test_a_tool_that_raises_timeout_error_itself_is_a_tool_failure(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient, tool_timeout: float | None
) -> None:
    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        raise TimeoutError("upstream read timed out")

    llm_server.call_tools(("fetch", {"url": "http://example.invalid"}))
    llm_server.reply("the page is unreachable")
    AgentLoop(llm_client, tools=[fetch], tool_timeout=tool_timeout).run("read it")
    [message] = tool_messages(llm_server.requests[1])
    assert message["content"] == (
        "error: tool 'fetch' failed: TimeoutError: upstream read timed out"
    )


@pytest.mark.parametrize(
    "condition",
    [
        'tool_results.escalate.status == "done"',  # a result this turn did not produce
        'content.missing == "x"',  # an attribute a string does not have
        "turn / 0 > 1",  # arithmetic that fails
    ],
)
def test_an_exit_condition_that_fails_at_run_time_counts_as_false(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient, condition: str
) -> None:
    llm_server.call_tools(("add", {"a": 1, "b": 2}))
    llm_server.reply("three")
    output = AgentLoop(llm_client, tools=[add], exit_condition=condition).run("add 1 and 2")
    assert (output.exit_reason, output.content) == ("stop", "three")


def test_tool_results_that_are_not_json_values_do_not_end_the_run(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    @tool
    def pairs() -> dict[tuple[str, str], int]:
        """Counts by pair."""
        return {("a", "b"): 1}

    @tool
    def nested() -> list[Any]:
        """A list that holds itself."""
        items: list[Any] = []
        items.append(items)
        return items

    llm_server.call_tools(("pairs", {}), ("nested", {}))
    llm_server.reply("done")
    output = AgentLoop(llm_client, tools=[pairs, nested]).run("count")
    assert output.content == "done"
    contents = [m["content"] for m in tool_messages(llm_server.requests[1])]
    assert contents == ["{('a', 'b'): 1}", "[[...]]"]
    restored = AgentCheckpoint.from_json(output.checkpoint.to_json())
    assert sorted(restored.tool_results.values()) == ["[[...]]", "{('a', 'b'): 1}"]
