"""Stream chunks a streaming run yields: ``Token``, ``ToolStart``, ``ToolEnd``, ``Done``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def chunk_to_dict(chunk: AgentStreamChunk) -> dict[str, Any]:
    """A chunk as plain JSON data with a ``type`` (``token``, ``tool_start``, ``tool_end``,
    ``done``), as the bus streams it."""
    if isinstance(chunk, Token):
        return {"type": "token", "text": chunk.text, "turn": chunk.turn}
    if isinstance(chunk, ToolStart):
        return {
            "type": "tool_start",
            "tool_name": chunk.tool_name,
            "tool_call_id": chunk.tool_call_id,
            "turn": chunk.turn,
        }
    if isinstance(chunk, ToolEnd):
        return {
            "type": "tool_end",
            "tool_name": chunk.tool_name,
            "tool_call_id": chunk.tool_call_id,
            "success": chunk.success,
            "turn": chunk.turn,
        }
    output = chunk.output
    return {
        "type": "done",
        "content": output.content,
        "finish_reason": output.finish_reason,
        "exit_reason": output.exit_reason,
        "turns_used": output.turns_used,
        "usage": {
            "prompt_tokens": output.usage.prompt_tokens,
            "completion_tokens": output.usage.completion_tokens,
        },
    }
