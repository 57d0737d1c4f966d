"""The bus's methods as MCP tools: names, schemas, descriptions. Pure: no I/O.

Every method of every live agent (the bus's ``methods/list``) is a tool named
``<agent>__<method>``, characters a model's tool name cannot carry (``/``, ``.``)
written ``_``. A method that reads a caller's stream (``streaming: request``) is
left out: an MCP call has no stream to send.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

SEPARATOR = "__"
#: The names every model host accepts (OpenAI's function names; MCP allows more).
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_OBJECT = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class BusTool:
    """One method of one agent, as an MCP tool."""

    name: str
    agent: str
    method: str
    description: str
    input_schema: Mapping[str, Any]
    #: The method streams its result (each chunk is a progress notification).
    streams: bool = False


def tool_name(agent: str, method: str) -> str:
    return _UNSAFE.sub("_", agent) + SEPARATOR + _UNSAFE.sub("_", method)


def _description(entry: Mapping[str, Any], agent: str, method: str, streams: bool) -> str:
    text = str(entry.get("description") or "").strip() or f"Method {method} of agent {agent}."
    if streams:
        text += " (Streams its results: each one is reported as progress, all come at the end.)"
    return text


def _input_schema(params: Any) -> dict[str, Any]:
    """An MCP input schema is an object schema; a method without one takes any object."""
    if isinstance(params, Mapping) and params.get("type") == "object":
        return dict(params)
    return dict(_OBJECT)


def catalog(
    entries: Iterable[Mapping[str, Any]], *, problems: list[str] | None = None
) -> dict[str, BusTool]:
    """The tools of ``methods/list`` entries, by name (the first of two that share one).

    Why a method is left out is logged as a warning, or, given ``problems``, added to
    it instead (a caller listing again and again logs only what is new)."""
    tools: dict[str, BusTool] = {}
    warn = problems.append if problems is not None else log.warning
    for entry in entries:
        agent, method = entry.get("agent"), entry.get("name")
        if not isinstance(agent, str) or not isinstance(method, str):
            continue
        if entry.get("streaming") == "request":
            continue
        name = tool_name(agent, method)
        if not TOOL_NAME.match(name):
            warn(f"{agent}.{method} left out: tool name {name!r} is too long")
            continue
        if name in tools:
            known = tools[name]
            warn(
                f"method {method} of agent {agent} left out: its tool name {name!r} "
                f"is taken by {known.agent}.{known.method}"
            )
            continue
        streams = entry.get("streaming") == "response"
        tools[name] = BusTool(
            name,
            agent,
            method,
            _description(entry, agent, method, streams),
            _input_schema(entry.get("params")),
            streams,
        )
    return tools
