"""``AgentLoop``: the bounded tool-calling loop of an LLM agent.

Each turn sends the conversation to the model; when it answers with tool
calls, they run (concurrently, up to ``max_tool_concurrency``), their results go
back as tool messages in call order, the ``exit_condition`` is checked, and the
next turn starts. A turn without tool calls ends the run. After ``max_turns``
turns without an answer, :class:`MaxTurnsExceeded` carries a checkpoint.

The core is async and knows nothing about transports; ``run``/``stream`` are
the sync twins of ``arun``/``astream`` (they drive the same core on the calling
thread's private event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from a2a_bus.llm import spans
from a2a_bus.llm._sync import iterate_sync, run_sync
from a2a_bus.llm.checkpoint import AgentCheckpoint, jsonable_results
from a2a_bus.llm.chunks import AgentStreamChunk, Done, Token
from a2a_bus.llm.client import LlmClient
from a2a_bus.llm.dispatch import ToolResult
from a2a_bus.llm.errors import AgentConfigError, LlmError, MaxTurnsExceeded
from a2a_bus.llm.exit import ExitCondition
from a2a_bus.llm.listeners import (
    AgentListener,
    CallbackContext,
    ListenerGroup,
    LlmCalled,
    LoopExited,
    TurnStarted,
)
from a2a_bus.llm.mcp_servers import McpServer, check_unique
from a2a_bus.llm.mcp_tools import McpTools
from a2a_bus.llm.memory.stores import ConversationStore, InMemoryStore
from a2a_bus.llm.memory.strategies import MemoryStrategy, full
from a2a_bus.llm.messages import ChatResponse, LlmMessage, Usage
from a2a_bus.llm.output import AgentOutput
from a2a_bus.llm.soul import SoulProvider, as_soul
from a2a_bus.llm.tool_turn import ToolTurn
from a2a_bus.llm.tools import AgentTool, ToolRegistry

Prompt = str | LlmMessage | Sequence[LlmMessage] | None


def to_messages(prompt: Prompt) -> list[LlmMessage]:
    """Normalise a prompt: a string is a user message; messages pass through."""
    if prompt is None:
        return []
    if isinstance(prompt, str):
        return [LlmMessage.user(prompt)]
    if isinstance(prompt, LlmMessage):
        return [prompt]
    messages = list(prompt)
    for item in messages:
        if not isinstance(item, LlmMessage):
            raise TypeError(f"prompt items must be LlmMessage, got {type(item).__name__}")
    return messages


class AgentLoop:
    """An LLM agent: model, tools, memory, limits and observers."""

    def __init__(
        self,
        client: LlmClient,
        *,
        tools: ToolRegistry | Iterable[AgentTool | Callable[..., Any]] = (),
        name: str = "agent",
        model: str | None = None,
        system_prompt: str | SoulProvider | None = None,
        max_turns: int = 10,
        max_tool_concurrency: int | None = None,
        temperature: float | None = None,
        memory: MemoryStrategy | None = None,
        store: ConversationStore | None = None,
        exit_condition: str | ExitCondition | None = None,
        listeners: Sequence[AgentListener] = (),
        context: Mapping[str, Any] | None = None,
        tool_timeout: float | None = None,
        streaming: bool = False,
        mcp_servers: Sequence[McpServer] = (),
    ) -> None:
        if not isinstance(client, LlmClient):
            raise AgentConfigError(f"client must be an LlmClient, got {type(client).__name__}")
        if not isinstance(max_turns, int) or max_turns < 1:
            raise AgentConfigError(f"max_turns must be an integer >= 1, got {max_turns!r}")
        if max_tool_concurrency is not None and (
            not isinstance(max_tool_concurrency, int) or max_tool_concurrency < 1
        ):
            raise AgentConfigError(
                "max_tool_concurrency must be None or an integer >= 1, "
                f"got {max_tool_concurrency!r}"
            )
        if tool_timeout is not None and not tool_timeout > 0:  # NaN too
            raise AgentConfigError(f"tool_timeout must be > 0, got {tool_timeout!r}")
        if temperature is not None and not math.isfinite(temperature):  # JSON has no NaN
            raise AgentConfigError(f"temperature must be a finite number, got {temperature!r}")
        self.client = client
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.name = name
        self.model = model or client.model
        self.soul = as_soul(system_prompt)
        self.max_turns = max_turns
        self.max_tool_concurrency = max_tool_concurrency
        self.temperature = temperature
        self.memory = memory or full()
        self.store = store if store is not None else InMemoryStore()
        if isinstance(exit_condition, str):
            exit_condition = ExitCondition(exit_condition)
        self.exit_condition = exit_condition
        self.listeners = ListenerGroup(listeners)
        self.context: dict[str, Any] = dict(context or {})
        self.tool_timeout = tool_timeout
        #: Hint for hosts (the bus): deliver this agent's answers as streams.
        self.streaming = streaming
        try:
            check_unique(mcp_servers)
        except ValueError as exc:
            raise AgentConfigError(str(exc)) from None
        #: MCP servers whose tools the agent gets once they run (:meth:`mcp_session`).
        self.mcp_servers = tuple(mcp_servers)

    def __repr__(self) -> str:
        return (
            f"AgentLoop(name={self.name!r}, model={self.model!r}, tools={self.tools.names()!r}, "
            f"memory={self.memory}, max_turns={self.max_turns})"
        )

    # -- MCP servers -------------------------------------------------------------

    def with_tools(self, tools: Iterable[AgentTool]) -> AgentLoop:
        """A copy of this loop with ``tools`` added and no MCP servers left to start."""
        twin = copy.copy(self)
        try:
            twin.tools = ToolRegistry([*self.tools, *tools])
        except ValueError as exc:
            raise AgentConfigError(str(exc)) from None
        twin.mcp_servers = ()
        return twin

    @contextlib.contextmanager
    def mcp_session(self) -> Iterator[AgentLoop]:
        """This agent with its MCP servers running and their tools added (as
        ``<server>__<tool>``); the servers stop when the block ends. A server that
        cannot start raises :class:`~a2a_bus.llm.mcp_tools.McpServerError` naming it."""
        running = McpTools.start(self.mcp_servers)
        try:
            yield self.with_tools(running.tools)
        finally:
            running.close()

    @contextlib.asynccontextmanager
    async def amcp_session(self) -> AsyncIterator[AgentLoop]:
        """Async twin of :meth:`mcp_session`."""
        running = await McpTools.astart(self.mcp_servers)
        try:
            yield self.with_tools(running.tools)
        finally:
            await running.aclose()

    # -- public entry points -------------------------------------------------

    async def arun(
        self,
        prompt: Prompt = None,
        *,
        conversation: str | None = None,
        context: Mapping[str, Any] | None = None,
        checkpoint: AgentCheckpoint | None = None,
    ) -> AgentOutput:
        """Run until an answer, the exit condition, or ``MaxTurnsExceeded``."""
        return await _last(self._drive(prompt, conversation, context, checkpoint, False, False))

    def run(
        self,
        prompt: Prompt = None,
        *,
        conversation: str | None = None,
        context: Mapping[str, Any] | None = None,
        checkpoint: AgentCheckpoint | None = None,
    ) -> AgentOutput:
        """Sync twin of :meth:`arun` (not from inside an event loop)."""
        return run_sync(
            "AgentLoop.run()",
            lambda: _last(self._drive(prompt, conversation, context, checkpoint, False, True)),
        )

    def astream(
        self,
        prompt: Prompt = None,
        *,
        conversation: str | None = None,
        context: Mapping[str, Any] | None = None,
        checkpoint: AgentCheckpoint | None = None,
    ) -> AsyncIterator[AgentStreamChunk]:
        """Chunks as the run goes: ``Token``, ``ToolStart``, ``ToolEnd``, then ``Done``."""
        return self._drive(prompt, conversation, context, checkpoint, True, False)

    def stream(
        self,
        prompt: Prompt = None,
        *,
        conversation: str | None = None,
        context: Mapping[str, Any] | None = None,
        checkpoint: AgentCheckpoint | None = None,
    ) -> Iterator[AgentStreamChunk]:
        """Sync twin of :meth:`astream`."""
        return iterate_sync(
            "AgentLoop.stream()",
            lambda: self._drive(prompt, conversation, context, checkpoint, True, True),
        )

    async def aresume(
        self, checkpoint: AgentCheckpoint, prompt: Prompt = None, **kwargs: Any
    ) -> AgentOutput:
        """Continue from a checkpoint with a fresh turn budget (optionally adding a prompt)."""
        return await self.arun(prompt, checkpoint=checkpoint, **kwargs)

    def resume(
        self, checkpoint: AgentCheckpoint, prompt: Prompt = None, **kwargs: Any
    ) -> AgentOutput:
        return self.run(prompt, checkpoint=checkpoint, **kwargs)

    # -- the core --------------------------------------------------------------

    async def _drive(
        self,
        prompt: Prompt,
        conversation: str | None,
        run_context: Mapping[str, Any] | None,
        checkpoint: AgentCheckpoint | None,
        streaming: bool,
        sync: bool,
    ) -> AsyncIterator[AgentStreamChunk]:
        if self.mcp_servers:
            names = ", ".join(server.name for server in self.mcp_servers)
            raise AgentConfigError(
                f"agent {self.name!r} mounts MCP servers ({names}): run it inside "
                "`with loop.mcp_session() as agent:` (an agent on a bus starts them itself)"
            )
        new_messages = to_messages(prompt)
        tool_turn = ToolTurn(
            self.name, self.tools, self.listeners, self.tool_timeout, self.max_tool_concurrency
        )
        if checkpoint is not None:
            conversation = conversation or checkpoint.conversation_id
            history = list(checkpoint.conversation)
            turn_base = checkpoint.turn_count
        else:
            history = (
                await self._store_call(sync, self.store.load, conversation) if conversation else []
            )
            turn_base = 0
        if not new_messages and not history:
            raise ValueError("nothing to answer: give a prompt or a checkpoint")
        values = {**self.context, **run_context} if run_context else self.context
        callback = CallbackContext(uuid.uuid4().hex, self.name, conversation)
        memory = self.memory.create(history)
        await memory.aadd(*new_messages)
        system_prompt = self.soul.system_prompt(values)
        system = [LlmMessage.system(system_prompt)] if system_prompt else []

        turns = llm_calls = 0
        usage = Usage()
        started = time.perf_counter()
        latest_results: dict[str, Any] = {}
        response: ChatResponse | None = None
        exit_reason = "max_turns"
        listeners = self.listeners
        run = spans.start_run(self.name, self.model, conversation)
        failed: BaseException | None = None
        try:
            for turn in range(turn_base + 1, turn_base + self.max_turns + 1):
                turns += 1
                messages = system + memory.messages()
                if listeners:
                    listeners.emit("on_turn_started", callback, TurnStarted(turn, len(messages)))
                call_started = time.perf_counter()
                with spans.model_call(run, self.model) as answered:
                    if streaming:
                        response = None
                        async for item in self._stream_llm(messages):
                            if isinstance(item, str):
                                yield Token(item, turn)
                            else:
                                response = item
                        if response is None:
                            raise LlmError("the LLM stream ended without a response")
                    else:
                        response = await self._chat(messages)
                    answered.append(response)
                llm_calls += 1
                usage += response.usage
                if listeners:
                    listeners.emit(
                        "on_llm_called",
                        callback,
                        LlmCalled(
                            turn,
                            response.model or self.model,
                            response.usage.prompt_tokens,
                            response.usage.completion_tokens,
                            (time.perf_counter() - call_started) * 1000.0,
                            response.finish_reason,
                        ),
                    )
                assistant = response.message
                if not assistant.tool_calls:
                    await memory.aadd(assistant)
                    exit_reason = "stop"
                    break
                if streaming:
                    results: list[ToolResult] = []
                    async for chunk in tool_turn.stream(
                        assistant.tool_calls, turn, callback, values, results, run
                    ):
                        yield chunk
                else:
                    results = await tool_turn.run(
                        assistant.tool_calls, turn, callback, values, None, run
                    )
                await memory.aadd(assistant, *(result.message() for result in results))
                latest_results = {result.call.id: result.value for result in results}
                if self.exit_condition is not None and self.exit_condition.reached(
                    response, turn, results, system + memory.messages()
                ):
                    exit_reason = "exit_condition"
                    break
            snapshot = AgentCheckpoint(
                tuple(memory.messages()),
                turn_base + turns,
                jsonable_results(latest_results),
                conversation,
            )
            if listeners:
                listeners.emit(
                    "on_loop_exited",
                    callback,
                    LoopExited(
                        turns,
                        llm_calls,
                        usage.total_tokens,
                        (time.perf_counter() - started) * 1000.0,
                        exit_reason,
                    ),
                )
            if exit_reason == "max_turns":
                raise MaxTurnsExceeded(self.max_turns, snapshot)
            assert response is not None
            yield Done(
                AgentOutput(
                    content=response.content,
                    finish_reason=response.finish_reason,
                    turns_used=turns,
                    messages=tuple(system + memory.messages()),
                    tool_results=latest_results,
                    checkpoint=snapshot,
                    exit_reason=exit_reason,
                    usage=usage,
                )
            )
        except GeneratorExit:  # closed early by its reader: not a failure of the run
            raise
        except BaseException as exc:
            failed = exc
            raise
        finally:
            spans.end_run(run, usage, failed)
            if conversation:
                await self._store_call(sync, self.store.save, conversation, memory.messages())

    async def _chat(self, messages: list[LlmMessage]) -> ChatResponse:
        tools = self.tools.definitions()
        return await self.client.achat(
            messages, tools, model=self.model, temperature=self.temperature
        )

    def _stream_llm(self, messages: list[LlmMessage]) -> AsyncIterator[str | ChatResponse]:
        tools = self.tools.definitions()
        return self.client.astream(messages, tools, model=self.model, temperature=self.temperature)

    async def _store_call(self, sync: bool, method: Callable[..., Any], *args: Any) -> Any:
        if sync or not self.store.blocking:
            return method(*args)
        return await asyncio.to_thread(method, *args)


async def _last(chunks: AsyncIterator[AgentStreamChunk]) -> AgentOutput:
    output: AgentOutput | None = None
    async for chunk in chunks:
        if isinstance(chunk, Done):
            output = chunk.output
    assert output is not None  # the core always ends with Done or raises
    return output
