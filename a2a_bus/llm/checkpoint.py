"""``AgentCheckpoint``: a JSON-serialisable snapshot to resume an agent run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a_bus.llm.messages import LlmMessage

FORMAT_VERSION = 1


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: non-JSON leaves become strings, and a value JSON
    cannot hold at all (keys that are no strings, a cycle) its ``str()``, as the model
    read it."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def jsonable_results(results: Mapping[str, Any]) -> dict[str, Any]:
    """Tool results by call id as JSON data, each on its own (one odd result stays one)."""
    return {call_id: jsonable(value) for call_id, value in results.items()}


@dataclass(frozen=True, slots=True)
class AgentCheckpoint:
    """The conversation at a consistent point (after a turn's tool results)."""

    #: Messages up to and including the snapshot point (without the system prompt,
    #: which is re-derived from the agent's soul on resume).
    conversation: tuple[LlmMessage, ...]
    #: Turns completed so far; a resumed run numbers its turns from here.
    turn_count: int
    #: The latest tool results, keyed by tool-call id (plain JSON values).
    tool_results: Mapping[str, Any] = field(default_factory=dict)
    #: The memory key of the conversation, when the run had one.
    conversation_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "conversation": [m.to_dict() for m in self.conversation],
            "turn_count": self.turn_count,
            "tool_results": jsonable_results(self.tool_results),
            "conversation_id": self.conversation_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentCheckpoint:
        try:
            version = data.get("version", FORMAT_VERSION)
            if version != FORMAT_VERSION:
                raise ValueError(f"unsupported checkpoint version {version!r}")
            return cls(
                conversation=tuple(LlmMessage.from_dict(m) for m in data["conversation"]),
                turn_count=int(data["turn_count"]),
                tool_results=dict(data.get("tool_results") or {}),
                conversation_id=data.get("conversation_id"),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"invalid agent checkpoint: {exc!r}") from exc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> AgentCheckpoint:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"invalid agent checkpoint JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError("invalid agent checkpoint: expected a JSON object")
        return cls.from_dict(data)
