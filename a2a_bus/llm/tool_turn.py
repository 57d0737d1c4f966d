"""One turn's tool calls: run concurrently (up to a bound), each told to the
listeners, traced as a child span of the run, and announced as stream chunks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import Span

from a2a_bus.llm import spans
from a2a_bus.llm.chunks import AgentStreamChunk, ToolEnd, ToolStart
from a2a_bus.llm.dispatch import ToolResult, execute_call, run_calls
from a2a_bus.llm.listeners import (
    CallbackContext,
    ListenerGroup,
    ToolCompleted,
    ToolDispatched,
    summarize,
)
from a2a_bus.llm.messages import ToolCall
from a2a_bus.llm.tools import ToolContext, ToolRegistry
from a2a_bus.runtime import tracing


@dataclass(frozen=True)
class ToolTurn:
    """How an agent runs the tool calls of a turn."""

    #: The agent's name, as its tools see it.
    agent: str
    tools: ToolRegistry
    listeners: ListenerGroup
    #: Seconds one call may take (None: no limit).
    timeout: float | None
    #: Calls running at once (None: all of a turn's).
    concurrency: int | None

    async def run(
        self,
        calls: Sequence[ToolCall],
        turn: int,
        callback: CallbackContext,
        values: Mapping[str, Any],
        on_chunk: Callable[[AgentStreamChunk], None] | None,
        run: Span,
    ) -> list[ToolResult]:
        listeners = self.listeners

        async def run_one(call: ToolCall) -> ToolResult:
            if listeners:
                listeners.emit(
                    "on_tool_dispatched",
                    callback,
                    ToolDispatched(turn, call.id, call.name, call.arguments),
                )
            if on_chunk is not None:
                on_chunk(ToolStart(call.name, call.id, turn))
            context = ToolContext(
                self.agent, callback.conversation, turn, call.id, callback.execution_id, values
            )
            span = spans.tool_call(run, call, call.name in self.tools)
            with tracing.use_span(span):  # current: a bus call the tool makes is its child
                result = await execute_call(self.tools, call, context, self.timeout)
                if not result.success:
                    spans.tool_failed(span, str(result.value))
            if listeners:
                listeners.emit(
                    "on_tool_completed",
                    callback,
                    ToolCompleted(
                        turn,
                        call.id,
                        call.name,
                        result.success,
                        result.latency_ms,
                        summarize(result.content),
                    ),
                )
            if on_chunk is not None:
                on_chunk(ToolEnd(call.name, call.id, result.success, turn))
            return result

        return await run_calls(calls, run_one, self.concurrency)

    async def stream(
        self,
        calls: Sequence[ToolCall],
        turn: int,
        callback: CallbackContext,
        values: Mapping[str, Any],
        results: list[ToolResult],
        run: Span,
    ) -> AsyncIterator[AgentStreamChunk]:
        """Run the tools while yielding their start/end chunks as they happen."""
        queue: asyncio.Queue[AgentStreamChunk | None] = asyncio.Queue()
        task = asyncio.ensure_future(self.run(calls, turn, callback, values, queue.put_nowait, run))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (chunk := await queue.get()) is not None:
                yield chunk
            results.extend(task.result())
        finally:
            if not task.done():
                task.cancel()
