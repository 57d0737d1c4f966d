"""Stream chunks a streaming run yields: ``Token``, ``ToolStart``, ``ToolEnd``, ``Done``."""

from __future__ import annotations

from dataclasses import dataclass

from a2a_bus.llm.output import AgentOutput


@dataclass(frozen=True, slots=True)
class Token:
    """Text from the model as it arrives (one token or a group of them)."""

    text: str
    turn: int


@dataclass(frozen=True, slots=True)
class ToolStart:
    """Just before a tool is dispatched."""

    tool_name: str
    tool_call_id: str
    turn: int


@dataclass(frozen=True, slots=True)
class ToolEnd:
    """Right after a tool completed (``success`` false: the model gets an error)."""

    tool_name: str
    tool_call_id: str
    success: bool
    turn: int


@dataclass(frozen=True, slots=True)
class Done:
    """The last chunk: the loop has exited with this output."""

    output: AgentOutput


AgentStreamChunk = Token | ToolStart | ToolEnd | Done
