"""The almanac (``almanac``): an LLM agent with an MCP tool and a schedule.

- ``chat``: asked a length conversion ("how many mi is 42 km?"), it calls the
  ``convert_length`` tool of the units MCP server (:mod:`a2a_bus.examples.units_server`,
  started over stdio with the agent's actor) as ``units__convert_length`` and answers
  with its result;
- a schedule ``almanac-clock`` publishes a tick on ``almanac.ticks`` every second;
  the agent subscribes to it, so each tick wakes it (a trigger) and its note goes to
  ``digest.news`` (read by :class:`~a2a_bus.examples.concierge.DigestReader`).

The model is scripted (no key, no network), like the concierge's.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from a2a_bus.examples.concierge import DIGEST
from a2a_bus.llm import (
    AgentBuilder,
    LlmAgent,
    LlmClient,
    LlmMessage,
    ScriptedClient,
    ToolCall,
    ToolDefinition,
    llm_agent_class,
)
from a2a_bus.llm.mcp_servers import McpServer
from a2a_bus.schedule import Schedule

AGENT_ID = "almanac"
TICKS = "almanac.ticks"
CLOCK = "almanac-clock"
TOOL = "units__convert_length"

SYSTEM_PROMPT = (
    "You are the almanac. Convert lengths with the units__convert_length tool and "
    "answer with its result. For a clock tick, answer with a one-line check-in."
)

_QUESTION = re.compile(r"how many (\w+) is (-?\d+(?:\.\d+)?) ?(\w+)", re.IGNORECASE)
_EVENT = re.compile(r"Event \S+ on (?P<subject>\S+) \(id (?P<id>[^)]*)\):", re.DOTALL)


def respond(messages: Sequence[LlmMessage], tools: Sequence[ToolDefinition]) -> str | ToolCall:
    """The scripted model: the next step of the conversation so far."""
    last = messages[-1]
    text = last.content or ""
    if last.role == "tool":
        question = _QUESTION.search(_last_user_message(messages))
        if question is None or text.startswith("error:"):
            return f"The units server could not answer ({text})"
        to_unit, value, from_unit = question.groups()
        result = json.loads(text).get("result")
        return f"{value} {from_unit} = {result} {to_unit}"
    event = _EVENT.match(text)
    if event:
        return f"Check-in at tick {event['id'].split('@', 1)[-1]}"
    question = _QUESTION.search(text)
    if question and any(tool.name == TOOL for tool in tools):
        to_unit, value, from_unit = question.groups()
        arguments = {"value": float(value), "from_unit": from_unit, "to_unit": to_unit}
        return ToolCall.of(TOOL, arguments)
    return "Ask me a length conversion, for example: how many mi is 42 km?"


def _last_user_message(messages: Sequence[LlmMessage]) -> str:
    return next((m.content or "" for m in reversed(messages) if m.role == "user"), "")


def scripted_client() -> ScriptedClient:
    """The almanac's model: :func:`respond`, no key, no network."""
    return ScriptedClient(respond, model="scripted-almanac", record=False)


def units_server() -> McpServer:
    """The units MCP server, started as a child process of this Python, in the folder
    this package was imported from (so the child imports the same copy of it)."""
    where = Path(__file__).resolve().parents[2]
    module = "a2a_bus.examples.units_server"
    return McpServer.stdio("units", sys.executable, "-m", module, cwd=where)


def almanac_class(client: LlmClient, every: float = 1.0) -> type[LlmAgent]:
    """The almanac agent class, thinking with ``client``; its clock ticks ``every`` seconds."""
    loop = (
        AgentBuilder(AGENT_ID)
        .llm(client)
        .system_prompt(SYSTEM_PROMPT)
        .mcp_server(units_server())
        .max_turns(4)
        .build()
    )
    clock = Schedule(CLOCK, every=every, publish=TICKS)
    return llm_agent_class(
        loop,
        AGENT_ID,
        description="Converts lengths with an MCP tool and checks in on a schedule",
        subscribe=[TICKS],
        output_topic=DIGEST,
        schedules=[clock],
    )


Almanac = almanac_class(scripted_client())
