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
from a2a_bus.protocol.events import parse_time


class TaskState(StrEnum):
    """Task states by their 0.3 names (1.0 spells them ``TASK_STATE_<NAME>``)."""

    SUBMITTED = "submitted"
    WORKING = "working"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    REJECTED = "rejected"
    #: The agent asked for more: the caller's next message (same taskId) goes on.
    INPUT_REQUIRED = "input-required"

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


def parts_record(parts: list[Part]) -> list[list[Any]]:
    """Parts as JSON: ``[kind, value]`` pairs (:func:`parts_of` reads them back)."""
    return [[part.kind, part.value] for part in parts]


def parts_of(record: list[Any]) -> list[Part]:
    return [Part("text" if kind == "text" else "data", value) for kind, value in record]


@dataclass
class Message:
    role: Literal["user", "agent"]
    parts: list[Part]
    message_id: str = field(default_factory=new_id)
    context_id: str | None = None
    task_id: str | None = None

    def record(self) -> dict[str, Any]:
        """As JSON for the task log (:meth:`from_record` reads it back)."""
        return {
            "role": self.role,
            "parts": parts_record(self.parts),
            "messageId": self.message_id,
            "contextId": self.context_id,
            "taskId": self.task_id,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Message:
        role: Literal["user", "agent"] = "agent" if record.get("role") == "agent" else "user"
        return cls(
            role,
            parts_of(record["parts"]),
            message_id=str(record.get("messageId") or new_id()),
            context_id=record.get("contextId"),
            task_id=record.get("taskId"),
        )


class Artifact:
    """A task's output: parts under a name and an id, and optional ``metadata``.

    Streamed text is kept joined: text appended after a text part extends it, as an
    A2A client reconstructs ``append`` updates. The pieces are joined when ``parts``
    is read, not on every append (which would copy the text so far each time).
    """

    def __init__(
        self,
        parts: list[Part],
        name: str = "result",
        artifact_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.artifact_id = artifact_id if artifact_id is not None else new_id()
        self.metadata = metadata
        self._parts: list[Part] = []
        #: The pieces of a trailing text part, not in ``_parts`` yet.
        self._text: list[str] = []
        self.extend(parts)

    def __repr__(self) -> str:
        return f"Artifact({self.parts!r}, {self.name!r}, {self.artifact_id!r})"

    @property
    def parts(self) -> list[Part]:
        """The parts (read-only: change them through :meth:`extend`)."""
        if not self._text:
            return self._parts
        if len(self._text) > 1:
            self._text = ["".join(self._text)]
        return [*self._parts, Part.text(self._text[0])]

    def record(self) -> dict[str, Any]:
        """As JSON (:meth:`from_record` reads it back)."""
        return {
            "name": self.name,
            "artifactId": self.artifact_id,
            "metadata": self.metadata,
            "parts": parts_record(self.parts),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Artifact:
        metadata = record.get("metadata")
        return cls(
            parts_of(record["parts"]),
            str(record["name"]),
            str(record["artifactId"]),
            dict(metadata) if isinstance(metadata, dict) else None,
        )

    @property
    def ends_with_text(self) -> bool:
        return bool(self._text)

    def extend(self, parts: list[Part]) -> None:
        """Append streamed parts; consecutive text is joined into one part."""
        for part in parts:
            if part.kind == "text":
                self._text.append(part.value)
                continue
            if self._text:
                self._parts.append(Part.text("".join(self._text)))
                self._text = []
            self._parts.append(part)


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
    #: Facts about the run: ``{"redelivered": true}`` once another replica took it over.
    metadata: dict[str, Any] = field(default_factory=dict)

    def set_state(
        self, state: TaskState, message: Message | None = None, timestamp: str | None = None
    ) -> None:
        self.state = state
        self.message = message
        self.timestamp = timestamp or now()

    def record(self) -> dict[str, Any]:
        """As JSON (:meth:`from_record` reads it back)."""
        return {
            "id": self.id,
            "contextId": self.context_id,
            "history": [message.record() for message in self.history],
            "state": self.state.value,
            "message": None if self.message is None else self.message.record(),
            "timestamp": self.timestamp,
            "artifacts": [artifact.record() for artifact in self.artifacts],
            "metadata": self.metadata,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Task:
        """The task a stored record describes; ValueError (or another of the readers'
        errors) when it is none: its timestamp must be RFC 3339, as ListTasks reads it."""
        message = record.get("message")
        timestamp = record["timestamp"]
        if not isinstance(timestamp, str):
            raise TypeError(f"a task's timestamp is a string, not {timestamp!r:.60}")
        parse_time(timestamp)  # a ProtocolError (a ValueError) names what is wrong
        return cls(
            str(record["contextId"]),
            [Message.from_record(m) for m in record["history"]],
            id=str(record["id"]),
            state=TaskState(record["state"]),
            message=None if message is None else Message.from_record(message),
            timestamp=timestamp,
            artifacts=[Artifact.from_record(a) for a in record["artifacts"]],
            metadata=dict(record["metadata"]),
        )

    def agent_message(self, parts: list[Part]) -> Message:
        """A message from the agent within this task."""
        return Message("agent", parts, context_id=self.context_id, task_id=self.id)
