"""Agent-loop cost per turn (5 tool calls a turn, scripted LLM, no network).

Each case is shown twice: against the 1 ms per-turn budget (the target row), and
beside a baseline measured in the same run, the bare cost of one turn's work done
by hand (parse the 5 calls' JSON arguments, call the 5 functions, build and append
the tool messages). The difference is what the loop adds: schema validation,
concurrency, listener hooks, memory and bookkeeping.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from a2a_bus.bench.report import Report, Row, per_call_us
from a2a_bus.llm import (
    AgentLoop,
    ChatResponse,
    FunctionTool,
    LlmMessage,
    ScriptedClient,
    ToolCall,
    ToolDefinition,
    Usage,
)

#: The loop's budget per turn (microseconds), tools and LLM excluded.
TARGET_US = 1000.0
TOOL_COUNT = 5


def _add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _upper(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def _length(items: list[str]) -> int:
    """Count items."""
    return len(items)


def _echo(value: str, times: int = 1) -> str:
    """Repeat a value."""
    return value * times


def _flag(on: bool) -> bool:
    """Negate a flag."""
    return not on


FUNCTIONS: list[tuple[Callable[..., Any], dict[str, Any]]] = [
    (_add, {"a": 1, "b": 2}),
    (_upper, {"text": "hello"}),
    (_length, {"items": ["a", "b", "c"]}),
    (_echo, {"value": "ab", "times": 2}),
    (_flag, {"on": True}),
]


def _tools(kind: str) -> list[FunctionTool]:
    if kind == "async":
        made = []
        for func, _ in FUNCTIONS:

            async def call(__func: Callable[..., Any] = func, **kwargs: Any) -> Any:
                return __func(**kwargs)

            made.append(FunctionTool(call, name=func.__name__.strip("_"), parameters=_schema(func)))
        return made
    return [
        FunctionTool(func, name=func.__name__.strip("_"), blocking=(kind == "threads"))
        for func, _ in FUNCTIONS
    ]


def _schema(func: Callable[..., Any]) -> dict[str, Any]:
    return dict(FunctionTool(func).parameters)


def _script(turns: int) -> list[ChatResponse]:
    calls = tuple(
        ToolCall(f"call_{i}", func.__name__.strip("_"), json.dumps(args))
        for i, (func, args) in enumerate(FUNCTIONS)
    )
    tool_turn = ChatResponse(LlmMessage.assistant(None, calls), "tool_calls", Usage(50, 20))
    final = ChatResponse(LlmMessage.assistant("done"), "stop", Usage(80, 5))
    return [tool_turn] * (turns - 1) + [final]


def _agent(kind: str, turns: int) -> AgentLoop:
    script = _script(turns)
    position = 0

    def respond(messages: Sequence[LlmMessage], tools: Sequence[ToolDefinition]) -> ChatResponse:
        nonlocal position
        answer = script[position % turns]
        position += 1
        return answer

    client = ScriptedClient(respond, record=False)
    return AgentLoop(client, tools=_tools(kind), max_turns=turns)


def _baseline_run(turns: int) -> None:
    """One run's tool work by hand: parse arguments, call, append messages."""
    messages = [LlmMessage.user("go")]
    calls = _script(turns)[0].tool_calls
    by_name = {func.__name__.strip("_"): func for func, _ in FUNCTIONS}
    for _ in range(turns - 1):
        messages.append(LlmMessage.assistant(None, calls))
        for call in calls:
            result = by_name[call.name](**json.loads(call.arguments))
            messages.append(LlmMessage.tool(call.id, json.dumps(result)))
    messages.append(LlmMessage.assistant("done"))


SYNC_CASES = (
    ("inline", "sync tools inline (blocking=False), run()"),
    ("threads", "sync tools in worker threads (default), run()"),
    ("async", "async tools, run()"),
)
ASYNC_CASES = (
    ("threads", "sync tools in worker threads (default), arun()"),
    ("async", "async tools, arun()"),
)


async def _per_turn_async(agent: AgentLoop, turns: int, number: int, repeats: int) -> float:
    # per_call_us is sync: time a batch of awaited runs inside one loop instead.
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            await agent.arun("go")
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6 / turns


def measure(quick: bool = False, turns: int = 10) -> tuple[float, dict[str, float]]:
    """The hand-done baseline and each case, in microseconds per turn."""
    seconds = 0.1 if quick else 0.5
    repeats = 3 if quick else 5
    baseline = per_call_us(lambda: _baseline_run(turns), seconds, repeats) / turns
    cases: dict[str, float] = {}
    for kind, label in SYNC_CASES:
        cases[label] = per_call_us(partial(_agent(kind, turns).run, "go"), seconds, repeats) / turns
    for kind, label in ASYNC_CASES:
        number = 20 if quick else 100
        cases[label] = asyncio.run(_per_turn_async(_agent(kind, turns), turns, number, repeats))
    return baseline, cases


def run(quick: bool = False, turns: int = 10) -> Report:
    baseline, cases = measure(quick, turns)
    report = Report(
        f"Agent loop: cost per turn, {TOOL_COUNT} tool calls a turn, scripted LLM (lower is better)"
    )
    for case, value in cases.items():
        report.add(Row(case, value, "us", TARGET_US, "1 ms budget", 1.0))
    for case, value in cases.items():
        report.add(Row(f"{case} vs by hand", value, "us", baseline, "tools called by hand"))
    report.notes.append(f"{turns} turns a run; the budget rows are the target (<= 1 ms a turn)")
    return report


if __name__ == "__main__":
    run().print()
