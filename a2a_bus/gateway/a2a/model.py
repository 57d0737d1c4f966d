"""The A2A objects the binding keeps, independent of the wire version.

Tasks, messages, artifacts and parts are held in this neutral form and rendered
for the caller's protocol version (1.0 or 0.3) by :mod:`.wire`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from a2a_bus.protocol import new_id


class TaskState(StrEnum):
    """Task states by their 0.3 names (1.0 spells them ``TASK_STATE_<NAME>``)."""

    SUBMITTED = "submitted"
    WORKING = "working"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    REJECTED = "rejected"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)


@dataclass(frozen=True)
class Part:
    """A text part or a data part (any JSON value)."""

    kind: Literal["text", "data"]
    value: Any

    @classmethod
    def text(cls, text: str) -> Part:
        return cls("text", text)

    @classmethod
    def data(cls, value: Any) -> Part:
        return cls("data", value)

    @classmethod
    def of(cls, value: Any) -> Part:
        """A string as text, anything else as data."""
        return cls.text(value) if isinstance(value, str) else cls.data(value)


@dataclass
class Message:
    role: Literal["user", "agent"]
    parts: list[Part]
    message_id: str = field(default_factory=new_id)
    context_id: str | None = None
    task_id: str | None = None


@dataclass
class Artifact:
    parts: list[Part]
    name: str = "result"
    artifact_id: str = field(default_factory=new_id)

    def extend(self, parts: list[Part]) -> None:
        """Append streamed parts; consecutive text is joined into one part."""
        for part in parts:
            last = self.parts[-1] if self.parts else None
            if part.kind == "text" and last is not None and last.kind == "text":
                self.parts[-1] = Part.text(last.value + part.value)
            else:
                self.parts.append(part)


def now() -> str:
    """An ISO 8601 UTC timestamp, as A2A writes them."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Task:
    context_id: str
    history: list[Message]
    id: str = field(default_factory=new_id)
    state: TaskState = TaskState.SUBMITTED
    #: The latest status message (progress, or why the task failed).
    message: Message | None = None
    timestamp: str = field(default_factory=now)
    artifacts: list[Artifact] = field(default_factory=list)

    def set_state(self, state: TaskState, message: Message | None = None) -> None:
        self.state = state
        self.message = message
        self.timestamp = now()

    def agent_message(self, parts: list[Part]) -> Message:
        """A message from the agent within this task."""
        return Message("agent", parts, context_id=self.context_id, task_id=self.id)
