"""A scripted ``LlmClient``: canned answers, so demos and tests run without a key.

Give it a fixed script (answers returned in order), rules (a regular
expression over the latest message picks the answer) or any function of the
conversation. An answer is a string (final text), a :class:`ToolCall` or a
list of them (one turn with several calls), an assistant :class:`LlmMessage`
or a full :class:`ChatResponse`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Sequence

from a2a_bus.llm.client import LlmClient, StreamItem
from a2a_bus.llm.errors import LlmError
from a2a_bus.llm.memory.tokens import HeuristicTokenEstimator
from a2a_bus.llm.messages import (
    ChatResponse,
    LlmMessage,
    ToolCall,
    ToolDefinition,
    Usage,
    new_call_id,
)

Step = str | ToolCall | Sequence[ToolCall] | LlmMessage | ChatResponse
Responder = Callable[[Sequence[LlmMessage], Sequence[ToolDefinition]], Step]

_estimator = HeuristicTokenEstimator()
_TOKEN = re.compile(r"\S+\s*|\s+")


class ScriptedClient(LlmClient):
    """Answers from a script, rules or a function; records every request (``record``)."""

    def __init__(
        self, script: Iterable[Step] | Responder, *, model: str = "scripted", record: bool = True
    ) -> None:
        self.model = model
        self.record = record
        self._lock = threading.Lock()
        self._responder: Responder | None = None
        self._script: list[Step] = []
        if callable(script):
            self._responder = script
        else:
            self._script = list(script)
        self._position = 0
        #: The conversations the client was asked to answer, in order.
        self.requests: list[list[LlmMessage]] = []

    @classmethod
    def from_rules(
        cls,
        rules: Sequence[tuple[str, Step]],
        default: Step = "I cannot help with that.",
        *,
        model: str = "scripted",
        record: bool = True,
    ) -> ScriptedClient:
        """The first rule whose pattern matches the latest message (user or tool) answers."""
        compiled = [(re.compile(pattern, re.IGNORECASE), step) for pattern, step in rules]

        def respond(messages: Sequence[LlmMessage], tools: Sequence[ToolDefinition]) -> Step:
            last = messages[-1].content or "" if messages else ""
            for pattern, step in compiled:
                if pattern.search(last):
                    return _fresh_ids(step)
            return _fresh_ids(default)

        return cls(respond, model=model, record=record)

    def _next_step(self, messages: Sequence[LlmMessage], tools: Sequence[ToolDefinition]) -> Step:
        with self._lock:
            if self.record:
                self.requests.append(list(messages))
            if self._responder is not None:
                return self._responder(messages, tools)
            if self._position >= len(self._script):
                raise LlmError(f"scripted client exhausted after {len(self._script)} answers")
            step = self._script[self._position]
            self._position += 1
            return step

    def chat(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        return _to_response(self._next_step(messages, tools), messages, model or self.model)

    async def achat(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        # Answers are computed in memory: no worker thread needed.
        return self.chat(messages, tools, model=model, temperature=temperature)

    def as_stream(self, response: ChatResponse) -> list[StreamItem]:
        """Word by word, like a model streaming tokens."""
        return [*_TOKEN.findall(response.content), response]


def _fresh_ids(step: Step) -> Step:
    # A rule's answer is reused across turns; tool-call ids must stay unique.
    if isinstance(step, ToolCall):
        return ToolCall(new_call_id(), step.name, step.arguments)
    if isinstance(step, Sequence) and not isinstance(step, str):
        return [ToolCall(new_call_id(), c.name, c.arguments) for c in step]
    return step


def _to_response(step: Step, messages: Sequence[LlmMessage], model: str) -> ChatResponse:
    if isinstance(step, ChatResponse):
        return step
    if isinstance(step, str):
        message = LlmMessage.assistant(step)
    elif isinstance(step, ToolCall):
        message = LlmMessage.assistant(None, (step,))
    elif isinstance(step, LlmMessage):
        message = step
    else:
        message = LlmMessage.assistant(None, tuple(step))
    usage = Usage(_estimator.estimate(messages), _estimator.estimate([message]))
    finish = "tool_calls" if message.tool_calls else "stop"
    return ChatResponse(message, finish, usage, model)
