"""Chat messages, tool calls and responses, in the OpenAI chat-completions shape.

These records are the common language of the runtime: clients produce them,
memory stores persist them (``to_dict``/``from_dict`` give plain JSON) and the
loop appends them to conversations.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD.

    JSON can escape half a character (``"\\ud83d"``), so a server's answer or a tool's
    result may hold one; no UTF-8 text can carry it, so kept as is it would fail the
    next request, the store and the bus. The two halves of a character split across
    two pieces of text join up again here. Applied where such text comes in.
    """
    if text.isascii():  # the common case, and no copy
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def new_call_id() -> str:
    """A fresh tool-call id, for backends that do not send one."""
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by the model.

    ``arguments`` is the raw JSON text the model produced: it is validated when
    the tool is dispatched, so a malformed call becomes an error fed back to
    the model rather than a crash here.
    """

    id: str
    name: str
    arguments: str = "{}"

    @classmethod
    def of(
        cls, name: str, arguments: Mapping[str, Any] | None = None, id: str | None = None
    ) -> ToolCall:
        """Build a call from a Python mapping (handy in scripts and tests)."""
        return cls(id=id or new_call_id(), name=name, arguments=json.dumps(dict(arguments or {})))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """A call in the wire form; ``ValueError`` when it does not have that shape."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a tool call must be an object, not {type(data).__name__}")
        function = data.get("function") or {}
        if not isinstance(function, Mapping):
            raise ValueError(f"a tool call's function must be an object, not {function!r:.100}")
        name = function.get("name", "")
        if not isinstance(name, str):
            raise ValueError(f"a tool call's name must be text, not {name!r:.100}")
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            # Some servers (Ollama) send the arguments as an object.
            arguments = json.dumps(arguments)
        call_id = well_formed(str(data.get("id") or new_call_id()))
        return cls(id=call_id, name=well_formed(name), arguments=well_formed(arguments))


@dataclass(frozen=True, slots=True)
class LlmMessage:
    """One message of a conversation."""

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    @classmethod
    def system(cls, content: str, name: str | None = None) -> LlmMessage:
        return cls("system", content, name=name)

    @classmethod
    def user(cls, content: str) -> LlmMessage:
        return cls("user", content)

    @classmethod
    def assistant(
        cls, content: str | None = None, tool_calls: tuple[ToolCall, ...] = ()
    ) -> LlmMessage:
        return cls("assistant", content, tool_calls=tuple(tool_calls))

    @classmethod
    def tool(cls, tool_call_id: str, content: str, name: str | None = None) -> LlmMessage:
        return cls("tool", content, tool_call_id=tool_call_id, name=name)

    def to_dict(self) -> dict[str, Any]:
        """The chat-completions wire form (also the persisted form)."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LlmMessage:
        """A message in the wire form; ``ValueError`` when it does not have that shape."""
        role = data.get("role")
        if role not in ROLES:
            raise ValueError(f"invalid message role {role!r}; expected one of {sorted(ROLES)}")
        content = data.get("content")
        if isinstance(content, list):
            # Content parts: keep the text parts, which is all the runtime uses.
            content = "".join(
                str(part.get("text", "")) for part in content if isinstance(part, dict)
            )
        if content is not None and not isinstance(content, str):
            raise ValueError(f"a message's content must be text, not {content!r:.100}")
        calls = data.get("tool_calls") or ()
        if not isinstance(calls, list | tuple):
            raise ValueError(f"tool_calls must be an array, not {calls!r:.100}")
        for key in ("tool_call_id", "name"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise ValueError(f"a message's {key} must be text, not {data[key]!r:.100}")
        call_id, name = data.get("tool_call_id"), data.get("name")
        return cls(
            role=role,
            content=None if content is None else well_formed(content),
            tool_calls=tuple(ToolCall.from_dict(call) for call in calls),
            tool_call_id=None if call_id is None else well_formed(call_id),
            name=None if name is None else well_formed(name),
        )


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What the model sees of a tool: name, description and JSON Schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one or more LLM calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """The complete answer of one chat call."""

    message: LlmMessage
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    model: str = ""

    @property
    def content(self) -> str:
        return self.message.content or ""

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return self.message.tool_calls
