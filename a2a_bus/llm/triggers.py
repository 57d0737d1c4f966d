"""Event triggers: a subscribed event becomes a prompt; the answer becomes an event.

Each trigger runs in its own conversation, keyed ``trigger:<event id>``; user
sessions are keyed ``session:<id>``, so the two never share messages.
"""

from __future__ import annotations

import json
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.llm.messages import LlmMessage

TRIGGER_PREFIX = "trigger:"
SESSION_PREFIX = "session:"


def trigger_conversation(event_id: str) -> str:
    """The conversation key of the run a triggering event starts."""
    return f"{TRIGGER_PREFIX}{event_id}"


def session_conversation(session_id: str) -> str:
    """The conversation key of a user session."""
    return f"{SESSION_PREFIX}{session_id}"


def event_prompt(event: CloudEvent) -> str:
    """The user message for an event: a header line, then its data (text as is, else JSON)."""
    data = event.get_data()
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    if data is None:
        body = "(no data)"
    elif isinstance(data, str):
        body = data
    else:
        body = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    subject = event.get_subject() or "(no subject)"
    return f"Event {event.get_type()} on {subject} (id {event.get_id()}):\n{body}"


def answer_data(agent_id: str, event: CloudEvent, content: str) -> dict[str, Any]:
    """The data of the event that carries the answer to ``event``."""
    return {
        "answer": content,
        "agent": agent_id,
        "conversation": trigger_conversation(event.get_id()),
        "trigger": {"id": event.get_id(), "subject": event.get_subject(), "type": event.get_type()},
    }


def answer_id(agent_id: str, event: CloudEvent) -> str:
    """A stable id for the answer, so a redelivered trigger's repeat is de-duplicated."""
    return f"{event.get_id()}.answer.{agent_id}"


def finished_answer(history: list[LlmMessage]) -> str | None:
    """The final answer when a stored conversation already ended with one (a redelivery)."""
    if history and history[-1].role == "assistant" and not history[-1].tool_calls:
        return history[-1].content or ""
    return None
