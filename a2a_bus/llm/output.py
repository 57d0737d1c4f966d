"""``AgentOutput``: what a finished agent run returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a_bus.llm.checkpoint import AgentCheckpoint
from a2a_bus.llm.messages import LlmMessage, Usage


@dataclass(frozen=True, slots=True)
class AgentOutput:
    """The result of a run that ended with an answer or an exit condition."""

    #: Final assistant content ("" when the exit condition stopped a tool round).
    content: str
    #: The provider's latest finish reason ("stop", "length", "tool_calls", ...).
    finish_reason: str
    #: Turns this run consumed.
    turns_used: int
    #: The full conversation sent to the model, system prompt included.
    messages: tuple[LlmMessage, ...]
    #: Latest-turn tool results keyed by tool-call id.
    tool_results: Mapping[str, Any]
    #: Snapshot to resume from; never None.
    checkpoint: AgentCheckpoint
    #: Why the loop ended: "stop" or "exit_condition".
    exit_reason: str = "stop"
    #: Tokens used by this run's LLM calls.
    usage: Usage = field(default_factory=Usage)
