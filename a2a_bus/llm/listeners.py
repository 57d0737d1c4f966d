"""Listener callbacks: observe every turn, LLM call and tool call of a run.

Order within a turn: ``on_turn_started`` -> ``on_llm_called`` -> (per tool call)
``on_tool_dispatched`` -> ``on_tool_completed`` -> next turn or ``on_loop_exited``.
All methods are no-ops by default; override the ones you need. A listener that
raises is logged and ignored: observability never breaks a run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CallbackContext:
    """Which run a callback belongs to."""

    execution_id: str
    agent: str
    conversation: str | None


@dataclass(frozen=True, slots=True)
class TurnStarted:
    turn: int
    message_count: int


@dataclass(frozen=True, slots=True)
class LlmCalled:
    turn: int
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    finish_reason: str


@dataclass(frozen=True, slots=True)
class ToolDispatched:
    turn: int
    tool_call_id: str
    tool_name: str
    arguments_json: str


@dataclass(frozen=True, slots=True)
class ToolCompleted:
    turn: int
    tool_call_id: str
    tool_name: str
    success: bool
    latency_ms: float
    result_summary: str


@dataclass(frozen=True, slots=True)
class LoopExited:
    total_turns: int
    total_llm_calls: int
    total_llm_tokens: int
    total_latency_ms: float
    #: "stop", "exit_condition" or "max_turns".
    exit_reason: str


class AgentListener:
    """Base class for run observers."""

    def on_turn_started(self, context: CallbackContext, payload: TurnStarted) -> None:
        pass

    def on_llm_called(self, context: CallbackContext, payload: LlmCalled) -> None:
        pass

    def on_tool_dispatched(self, context: CallbackContext, payload: ToolDispatched) -> None:
        pass

    def on_tool_completed(self, context: CallbackContext, payload: ToolCompleted) -> None:
        pass

    def on_loop_exited(self, context: CallbackContext, payload: LoopExited) -> None:
        pass


def summarize(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ListenerGroup:
    """Calls every listener in order, isolating their failures."""

    def __init__(self, listeners: Sequence[AgentListener]) -> None:
        self.listeners = tuple(listeners)

    def __bool__(self) -> bool:
        return bool(self.listeners)

    def emit(self, method: str, context: CallbackContext, payload: object) -> None:
        for listener in self.listeners:
            try:
                getattr(listener, method)(context, payload)
            except Exception:
                log.exception("agent listener %r failed in %s", listener, method)
