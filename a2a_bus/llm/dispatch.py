"""Running the tool calls of one turn: lookup, argument checks, concurrency cap.

A bad call (unknown tool, arguments that are not JSON or break the schema, a
tool that raises or times out) becomes an error result that goes back to the
model as the tool message, so the model can correct itself; it never ends the run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from a2a_bus.llm.messages import LlmMessage, ToolCall, well_formed
from a2a_bus.llm.tools import (
    AgentTool,
    ToolArgumentsError,
    ToolContext,
    ToolRegistry,
    UnknownToolError,
)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one tool call."""

    call: ToolCall
    success: bool
    #: The tool's return value, or the error message when ``success`` is false.
    value: Any
    #: The text the model receives as the tool message.
    content: str
    latency_ms: float

    def message(self) -> LlmMessage:
        return LlmMessage.tool(self.call.id, self.content, name=self.call.name)


def format_result(value: Any) -> str:
    """A tool's return value as tool-message text (JSON unless it is a string)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    text = call.arguments.strip() or "{}"
    try:
        arguments = json.loads(text)
    except ValueError as exc:
        raise ToolArgumentsError(
            f"arguments for tool {call.name!r} are not valid JSON ({exc}): {text[:200]}"
        ) from None
    if not isinstance(arguments, dict):
        raise ToolArgumentsError(
            f"arguments for tool {call.name!r} must be a JSON object, "
            f"got {type(arguments).__name__}"
        )
    return arguments


class _TimedOut(Exception):
    """The call outlived ``tool_timeout`` (not a ``TimeoutError`` the tool raised itself)."""


async def _invoke(
    agent_tool: AgentTool, arguments: dict[str, Any], context: ToolContext, timeout: float | None
) -> Any:
    if timeout is None:
        return await agent_tool.invoke(arguments, context)
    try:
        async with asyncio.timeout(timeout) as scope:
            return await agent_tool.invoke(arguments, context)
    except TimeoutError:
        if scope.expired():
            raise _TimedOut from None
        raise  # the tool's own timeout: reported as its failure


async def execute_call(
    registry: ToolRegistry, call: ToolCall, context: ToolContext, timeout: float | None = None
) -> ToolResult:
    """Run one call; every failure is turned into an error result."""
    started = time.perf_counter()
    try:
        agent_tool = registry.get(call.name)
        arguments = parse_arguments(call)
        agent_tool.validate(arguments)
        value = await _invoke(agent_tool, arguments, context, timeout)
    except (UnknownToolError, ToolArgumentsError) as exc:
        error = str(exc)
    except _TimedOut:
        error = f"tool {call.name!r} timed out after {timeout}s"
    except (Exception, SystemExit) as exc:  # the tool's own failure (argparse exits, say)
        error = f"tool {call.name!r} failed: {type(exc).__name__}: {exc}"
    else:
        latency = (time.perf_counter() - started) * 1000.0
        return ToolResult(call, True, value, well_formed(format_result(value)), latency)
    latency = (time.perf_counter() - started) * 1000.0
    return ToolResult(call, False, error, well_formed(f"error: {error}"), latency)


async def run_calls(
    calls: Sequence[ToolCall],
    run_one: Callable[[ToolCall], Awaitable[ToolResult]],
    limit: int | None,
) -> list[ToolResult]:
    """Run calls concurrently, at most ``limit`` at a time; results in call order."""
    if len(calls) == 1:
        return [await run_one(calls[0])]
    if limit is None or limit >= len(calls):
        return list(await asyncio.gather(*(run_one(call) for call in calls)))
    semaphore = asyncio.Semaphore(limit)

    async def guarded(call: ToolCall) -> ToolResult:
        async with semaphore:
            return await run_one(call)

    return list(await asyncio.gather(*(guarded(call) for call in calls)))
