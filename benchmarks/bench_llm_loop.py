"""Agent-loop overhead per turn (5 tool calls a turn, scripted LLM, no network).

Each figure is shown beside a baseline measured in the same run: the bare cost of
one turn's work done by hand (parse the 5 calls' JSON arguments, call the 5
functions, build and append the tool messages). The difference is what the loop
adds: schema validation, concurrency, listeners hooks, memory and bookkeeping.

    python benchmarks/bench_llm_loop.py [--quick]

Importable: ``run(quick=False, turns=10) -> dict`` (figures in microseconds per
turn) and ``to_report(results)`` for the rich table.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Sequence
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


def run(quick: bool = False, turns: int = 10) -> dict[str, Any]:
    """Measure; figures are microseconds per turn."""
    seconds = 0.1 if quick else 0.5
    repeats = 3 if quick else 5
    baseline = per_call_us(lambda: _baseline_run(turns), seconds, repeats) / turns
    results: dict[str, Any] = {
        "turns_per_run": turns,
        "tools_per_turn": TOOL_COUNT,
        "target_us_per_turn": TARGET_US,
        "baseline_us_per_turn": baseline,
        "cases": {},
    }
    cases: dict[str, float] = results["cases"]
    for kind, label in (
        ("inline", "sync tools inline (blocking=False), run()"),
        ("threads", "sync tools in worker threads (default), run()"),
        ("async", "async tools, run()"),
    ):
        agent = _agent(kind, turns)
        cases[label] = per_call_us(lambda agent=agent: agent.run("go"), seconds, repeats) / turns

    for kind, label in (
        ("threads", "sync tools in worker threads (default), arun()"),
        ("async", "async tools, arun()"),
    ):
        agent = _agent(kind, turns)

        async def measure(agent: AgentLoop = agent) -> float:
            # per_call_us is sync: time a batch of awaited runs inside one loop instead.
            import time

            number = 20 if quick else 100
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(number):
                    await agent.arun("go")
                best = min(best, (time.perf_counter() - start) / number)
            return best * 1e6 / turns

        cases[label] = asyncio.run(measure())
    results["target_met"] = all(value < TARGET_US for value in cases.values())
    return results


def to_report(results: dict[str, Any]) -> Report:
    report = Report(
        f"Agent loop: cost per turn, {results['tools_per_turn']} tool calls a turn, "
        f"scripted LLM (lower is better)"
    )
    for case, value in results["cases"].items():
        report.add(Row(case, value, "us", results["baseline_us_per_turn"], "tools called by hand"))
    verdict = "met" if results["target_met"] else "NOT met"
    report.notes.append(f"target: under {results['target_us_per_turn']:.0f} us per turn: {verdict}")
    return report


if __name__ == "__main__":
    figures = run(quick="--quick" in sys.argv)
    to_report(figures).print()
    raise SystemExit(0 if figures["target_met"] else 1)
