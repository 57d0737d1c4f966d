"""Declarative agent files (YAML, or TOML): the Python counterpart of the agent DSL.

.. code-block:: yaml

    name: support
    model: gpt-4o-mini                # optional: the LLM client's default model
    system_prompt: You are a helpful support agent.
    max_turns: 8
    memory: sliding_window(20)
    exit_condition: finish_reason == "stop" || tool_call("escalate_to_human")
    tools:
      search_knowledge_base:
        description: Search the knowledge base
        callable: support_tools:search_knowledge_base   # or ./tools.py:search
        input:
          query: tool_args.query      # the model fills it (required in the schema)
          locale: ctx.locale          # from the context given at build/run time
          limit: 3                    # a constant

    # Served on the bus (a2a_bus.llm.bus_agent.agent_class_from_file):
    id: support                       # the bus agent id (default: name)
    subscribe: [tickets.created]      # event triggers: each event becomes a prompt
    output_topic: tickets.answered    # where trigger answers are published
    bus_tools: [publish, call_agent]  # or true for every bus tool
    schedules:                        # ticks that wake it (a2a_bus.schedule)
      morning: {cron: "0 9 * * *", publish: tickets.created, data: Review the queue.}

    mcp_servers:                      # tools of MCP servers (a2a_bus.llm.mcp_servers)
      files: {command: python, args: [files_server.py]}

Every problem is reported as ``file:line: key: problem``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from a2a_bus.core.routing import RoutingError, subject_matches, validate_name, validate_subject
from a2a_bus.llm.agent_doc import Document, Path_, expect, read_text, read_toml, read_yaml
from a2a_bus.llm.bus_tools import BUS_TOOLS, check_bus_tool
from a2a_bus.llm.callables import callable_label, resolve_callable
from a2a_bus.llm.errors import AgentConfigError, AgentFileError
from a2a_bus.llm.exit import ExitCondition
from a2a_bus.llm.input_mapping import InputMappingError, mapped_tool
from a2a_bus.llm.mcp_servers import McpConfigError, McpServer, servers_from
from a2a_bus.llm.memory.strategies import MemoryStrategy, parse_memory
from a2a_bus.llm.tools import TOOL_NAME, AgentTool, FunctionTool
from a2a_bus.schedule.spec import Schedule, ScheduleError

__all__ = [
    "BusSettings",
    "FileBuilder",
    "callable_label",
    "fill_from_file",
    "resolve_callable",
]

TOP_KEYS = {
    "name",
    "description",
    "model",
    "system_prompt",
    "system_prompt_file",
    "max_turns",
    "max_tool_concurrency",
    "temperature",
    "memory",
    "streaming",
    "streaming_buffer_capacity",
    "exit_condition",
    "tool_timeout",
    "tools",
    "mcp_servers",
    "id",
    "subscribe",
    "output_topic",
    "bus_tools",
    "schedules",
}
TOOL_KEYS = {"description", "callable", "input", "blocking"}


@dataclass(frozen=True, slots=True)
class BusSettings:
    """What an agent file says about serving the agent on a bus."""

    #: The bus agent id: ``id``, else ``name``, else the file stem (None: not a valid id).
    agent_id: str | None
    description: str = ""
    #: Subjects whose events become prompts (wildcards allowed).
    subscribe: tuple[str, ...] = ()
    #: Subject the answers to those events are published on.
    output_topic: str | None = None
    #: Names of the bus tools to give the model (``publish``, ``call_agent``, ``read_topic``).
    bus_tools: tuple[str, ...] = ()
    #: Schedules run while the agent does (one that publishes on a subscribed subject
    #: wakes it through its triggers).
    schedules: tuple[Schedule, ...] = ()


# -- validation --------------------------------------------------------------


class FileBuilder(Protocol):
    """What filling a builder from an agent file asks of it
    (:class:`~a2a_bus.llm.builder.AgentBuilder` is one)."""

    def name(self, name: str) -> object: ...
    def model(self, model: str) -> object: ...
    def system_prompt(self, prompt: str) -> object: ...
    def system_prompt_file(self, path: str | os.PathLike[str]) -> object: ...
    def max_turns(self, turns: int) -> object: ...
    def max_tool_concurrency(self, limit: int | None) -> object: ...
    def temperature(self, temperature: float | None) -> object: ...
    def tool_timeout(self, seconds: float | None) -> object: ...
    def memory(self, strategy: MemoryStrategy) -> object: ...
    def streaming(self, enabled: bool = True) -> object: ...
    def exit_condition(self, expression: ExitCondition) -> object: ...
    def tool(self, tool: AgentTool) -> object: ...
    def mcp_server(self, server: McpServer) -> object: ...


def _build(doc: Document, base: Path, builder: FileBuilder) -> str:
    """Fill ``builder`` from the document; the agent's name."""
    data = doc.data
    if not isinstance(data, Mapping):
        raise doc.error((), "an agent file must be a mapping of keywords (model, tools, ...)")
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise doc.error(
            (unknown[0],), f"unknown keyword; expected one of {', '.join(sorted(TOP_KEYS))}"
        )
    name = expect(
        doc, ("name",), data.get("name", Path(doc.file).name.split(".")[0]), str, "a string"
    )
    builder.name(name)
    # Optional: without it the LLM client's own model is used.
    if data.get("model") is not None:
        builder.model(expect(doc, ("model",), data["model"], str, "a model id string"))
    if "system_prompt" in data and "system_prompt_file" in data:
        raise doc.error(
            ("system_prompt_file",), "give system_prompt or system_prompt_file, not both"
        )
    if "system_prompt" in data:
        prompt = expect(doc, ("system_prompt",), data["system_prompt"], str, "a string")
        if not prompt.strip():
            raise doc.error(("system_prompt",), "must not be empty (omit it for no system prompt)")
        try:
            builder.system_prompt(prompt)
        except AgentConfigError as exc:
            raise doc.error(("system_prompt",), str(exc)) from None
    if "system_prompt_file" in data:
        rel = expect(doc, ("system_prompt_file",), data["system_prompt_file"], str, "a path")
        try:
            builder.system_prompt_file(base / rel)
        except AgentConfigError as exc:
            raise doc.error(("system_prompt_file",), str(exc)) from None
    if "max_turns" in data:
        turns = expect(doc, ("max_turns",), data["max_turns"], int, "an integer")
        if turns < 1:
            raise doc.error(("max_turns",), "must be >= 1")
        builder.max_turns(turns)
    if data.get("max_tool_concurrency") is not None:
        limit = expect(
            doc, ("max_tool_concurrency",), data["max_tool_concurrency"], int, "an integer"
        )
        if limit < 1:
            raise doc.error(("max_tool_concurrency",), "must be >= 1 (omit it for no limit)")
        builder.max_tool_concurrency(limit)
    if data.get("temperature") is not None:
        temperature = expect(doc, ("temperature",), data["temperature"], (int, float), "a number")
        if not 0 <= temperature <= 2:
            raise doc.error(("temperature",), "must be between 0 and 2")
        builder.temperature(float(temperature))
    if data.get("tool_timeout") is not None:
        timeout = expect(doc, ("tool_timeout",), data["tool_timeout"], (int, float), "seconds")
        if not timeout > 0:  # NaN too
            raise doc.error(("tool_timeout",), "must be > 0")
        builder.tool_timeout(float(timeout))
    if "memory" in data:
        try:
            builder.memory(parse_memory(data["memory"]))
        except ValueError as exc:
            raise doc.error(("memory",), str(exc)) from None
    if "streaming" in data:
        builder.streaming(expect(doc, ("streaming",), data["streaming"], bool, "true or false"))
    if "streaming_buffer_capacity" in data:
        capacity = expect(
            doc,
            ("streaming_buffer_capacity",),
            data["streaming_buffer_capacity"],
            int,
            "an integer",
        )
        if capacity < 1:
            raise doc.error(("streaming_buffer_capacity",), "must be >= 1")
    if data.get("exit_condition") is not None:
        expression = expect(doc, ("exit_condition",), data["exit_condition"], str, "an expression")
        try:
            builder.exit_condition(ExitCondition(expression))
        except AgentConfigError as exc:
            raise doc.error(("exit_condition",), str(exc)) from None
    tools = data.get("tools") or {}
    expect(doc, ("tools",), tools, Mapping, "a mapping of tool name -> tool block")
    for tool_name, block in tools.items():
        builder.tool(_tool(doc, base, str(tool_name), block))
    if data.get("mcp_servers") is not None:
        try:
            servers = servers_from(data["mcp_servers"], base)
        except McpConfigError as exc:
            path = ("mcp_servers", *exc.key.split(".")) if exc.key else ("mcp_servers",)
            raise doc.error(path, str(exc)) from None
        for server in servers:
            builder.mcp_server(server)
    return name


def _bus_settings(doc: Document, name: str) -> BusSettings:
    data = doc.data
    agent_id: str | None = name
    if "id" in data:
        agent_id = expect(doc, ("id",), data["id"], str, "an agent id string")
        try:
            validate_name(agent_id)
        except RoutingError as exc:
            raise doc.error(("id",), exc.message) from None
    else:
        try:
            validate_name(agent_id)
        except RoutingError:
            agent_id = None  # only an error when the agent is served on a bus
    description = data.get("description") or ""
    expect(doc, ("description",), description, str, "a string")
    subjects = data.get("subscribe") or []
    if isinstance(subjects, str):
        subjects = [subjects]
    expect(doc, ("subscribe",), subjects, list, "a subject or a list of subjects")
    for index, subject in enumerate(subjects):
        try:
            validate_subject(subject, wildcards=True)
        except RoutingError as exc:
            raise doc.error(("subscribe", str(index)), exc.message) from None
    output_topic = data.get("output_topic")
    if output_topic is not None:
        if not subjects:
            raise doc.error(
                ("output_topic",), "needs subscribe: (the topics whose events to answer)"
            )
        try:
            validate_subject(output_topic)
        except RoutingError as exc:
            raise doc.error(("output_topic",), exc.message) from None
        for subject in subjects:
            if subject_matches(subject, output_topic):
                raise doc.error(
                    ("output_topic",),
                    f"matches subscribe {subject!r}: the agent would answer its own answers",
                )
    tools = data.get("bus_tools") or ()
    if tools is True:
        tools = list(BUS_TOOLS)
    expect(doc, ("bus_tools",), tools, (list, tuple), "a list of bus tool names, or true")
    file_tools = data.get("tools") or {}
    for index, tool_name in enumerate(tools):
        try:
            check_bus_tool(tool_name)
        except ValueError as exc:
            raise doc.error(("bus_tools", str(index)), str(exc)) from None
        if tool_name in tools[:index]:
            raise doc.error(("bus_tools", str(index)), f"{tool_name!r} is listed twice")
        if tool_name in file_tools:
            raise doc.error(
                ("bus_tools", str(index)), f"{tool_name!r} is also the name of a tool in tools:"
            )
    schedules = _schedules(doc, data.get("schedules"))
    return BusSettings(
        agent_id, description, tuple(subjects), output_topic, tuple(tools), schedules
    )


def _schedules(doc: Document, entries: Any) -> tuple[Schedule, ...]:
    if entries is None:
        return ()
    expect(doc, ("schedules",), entries, Mapping, "a mapping of schedule name -> schedule")
    schedules = []
    for name, entry in entries.items():
        try:
            schedules.append(Schedule.from_dict(str(name), entry))
        except ScheduleError as exc:
            key = ("schedules", str(name), *([exc.key] if exc.key else []))
            raise doc.error(key, str(exc)) from None
    return tuple(schedules)


def _tool(doc: Document, base: Path, name: str, block: Any) -> AgentTool:
    path: Path_ = ("tools", name)
    if not TOOL_NAME.match(name):
        raise doc.error(path, "tool names use 1-64 of [A-Za-z0-9_-]")
    expect(doc, path, block, Mapping, "a tool block with description, callable and input")
    unknown = sorted(set(block) - TOOL_KEYS)
    if unknown:
        raise doc.error(
            (*path, unknown[0]),
            f"unknown tool keyword; expected one of {', '.join(sorted(TOOL_KEYS))}",
        )
    if "callable" not in block:
        raise doc.error(path, "missing 'callable' (module:function or path.py:function)")
    reference = expect(doc, (*path, "callable"), block["callable"], str, "module:function")
    try:
        func = resolve_callable(reference, base)
    except (ImportError, AttributeError, ValueError, OSError) as exc:
        raise doc.error((*path, "callable"), str(exc)) from None
    description = block.get("description")
    if description is not None:
        expect(doc, (*path, "description"), description, str, "a string")
    blocking = expect(doc, (*path, "blocking"), block.get("blocking", True), bool, "true or false")
    inputs = block.get("input")
    if inputs is not None:
        expect(doc, (*path, "input"), inputs, Mapping, "a mapping of parameter -> source")
    try:
        if inputs is None:
            return FunctionTool(func, name=name, description=description, blocking=blocking)
        return mapped_tool(
            func,
            inputs,
            name=name,
            description=description,
            blocking=blocking,
            label=callable_label(reference),
        )
    except InputMappingError as exc:
        key = (
            (*path, "input", exc.key)
            if inputs is not None and exc.key in inputs
            else (*path, "input")
        )
        raise doc.error(key, str(exc)) from None
    except (TypeError, ValueError) as exc:
        raise doc.error(path, f"cannot make a tool of {reference}: {exc}") from None


# -- entry points ------------------------------------------------------------


def fill_from_file(builder: FileBuilder, path: str | os.PathLike[str]) -> BusSettings:
    """Parse and validate an agent file into ``builder``; the file's bus settings."""
    file = Path(path)
    try:
        text = read_text(file)
    except AgentConfigError as exc:
        raise AgentFileError(str(file), None, "", str(exc)) from None
    doc = read_toml(str(file), text) if file.suffix == ".toml" else read_yaml(str(file), text)
    return _bus_settings(doc, _build(doc, file.parent, builder))
