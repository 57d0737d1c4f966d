"""The concierge (``concierge``): an LLM agent on the bus, built with ``a2a_bus.llm``.

It does two things:

- ``chat``: asked some arithmetic ("what is 42 - 23?"), it calls the calculator
  agent over the bus with the ``call_agent`` bus tool and answers with the result
  the bus returned;
- a trigger: every event on ``news.#`` becomes a prompt, and a one-line summary is
  published on ``digest.news`` (read by :class:`DigestReader` below).

The model is scripted (:class:`~a2a_bus.llm.ScriptedClient`: no key, no network):
:func:`respond` plays the model, so the answers are predictable yet built from what
the tools returned. Served on its own (``a2a-bus serve
a2a_bus.examples.calculator:Calculator a2a_bus.examples.concierge:Concierge``), it
talks to a real OpenAI-compatible model instead when ``OPENAI_BASE_URL`` or
``OPENAI_API_KEY`` is set (model: ``A2A_LLM_MODEL``). ``concierge_class(client)``
makes the agent on any client; the demo always uses ``scripted_client()``.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from typing import Any

from a2a_bus import Agent, method, subscribe
from a2a_bus.llm import (
    AgentBuilder,
    LlmAgent,
    LlmClient,
    LlmMessage,
    OpenAIClient,
    ScriptedClient,
    ToolCall,
    ToolDefinition,
    llm_agent_class,
)

AGENT_ID = "concierge"
NEWS = "news.#"
DIGEST = "digest.news"

SYSTEM_PROMPT = (
    "You are the concierge of a multi-agent bus. For arithmetic, call the calculator "
    "with the call_agent tool (agent 'calc', methods add, subtract, multiply, divide, "
    "params [a, b]) and answer with its result. For a news event, answer with a "
    "one-line summary."
)

_ARITHMETIC = re.compile(r"(-?\d+(?:\.\d+)?)\s*([-+*/])\s*(-?\d+(?:\.\d+)?)")
_METHODS = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}
# The prompt of a trigger (see docs/llm.md, "Event triggers").
_EVENT = re.compile(r"Event \S+ on (?P<subject>\S+) \(id [^)]*\):\n(?P<body>.*)", re.DOTALL)


def respond(messages: Sequence[LlmMessage], tools: Sequence[ToolDefinition]) -> str | ToolCall:
    """The scripted model: the next step of the conversation so far."""
    last = messages[-1]
    text = last.content or ""
    if last.role == "tool":
        # The calculator answered over the bus: the reply is made of its result.
        question = _ARITHMETIC.search(_last_user_message(messages))
        expression = question.group(0) if question else "that"
        if text.startswith("error:"):
            return f"The calculator could not work out {expression} ({text})"
        return f"{expression} = {text}"
    event = _EVENT.match(text)
    if event:
        return _summary(event["subject"], event["body"])
    question = _ARITHMETIC.search(text)
    if question:
        a, operator, b = question.groups()
        arguments = {"agent": "calc", "method": _METHODS[operator], "params": [_num(a), _num(b)]}
        return ToolCall.of("call_agent", arguments)
    return "Ask me some arithmetic, for example: what is 42 - 23?"


def _last_user_message(messages: Sequence[LlmMessage]) -> str:
    return next((m.content or "" for m in reversed(messages) if m.role == "user"), "")


def _num(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def _summary(subject: str, body: str) -> str:
    try:
        data: Any = json.loads(body)
    except ValueError:
        data = body
    headline = data.get("headline") if isinstance(data, dict) else None
    section = subject.rsplit(".", 1)[-1].capitalize()
    return f"{section} in brief: {headline or str(data)[:80]}"


def scripted_client() -> ScriptedClient:
    """The model of the demo: :func:`respond`, no key, no network."""
    # record=False: a long-running agent must not keep every request.
    return ScriptedClient(respond, model="scripted-concierge", record=False)


def default_client() -> LlmClient:
    """A real OpenAI-compatible model when the environment names one, else the script."""
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return OpenAIClient()
    return scripted_client()


def concierge_class(client: LlmClient) -> type[LlmAgent]:
    """The concierge agent class, thinking with ``client``."""
    loop = AgentBuilder(AGENT_ID).llm(client).system_prompt(SYSTEM_PROMPT).max_turns(4).build()
    return llm_agent_class(
        loop,
        AGENT_ID,
        description="Answers arithmetic with the calculator's help and summarizes the news",
        subscribe=[NEWS],
        output_topic=DIGEST,
        bus_tools=["call_agent"],
    )


Concierge = concierge_class(default_client())


class DigestReader(Agent):
    """Reads the concierge's news summaries from ``digest.news``."""

    agent_id = "digest-reader"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._digests: list[dict[str, Any]] = []

    @subscribe(DIGEST)
    def on_digest(self, event: Any) -> None:
        with self._lock:
            self._digests.append(event.get_data())

    @method
    def read(self) -> list[dict[str, Any]]:
        """Summaries read so far: ``{"answer", "agent", "conversation", "trigger"}`` each."""
        with self._lock:
            return list(self._digests)
