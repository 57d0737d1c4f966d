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

Every problem is reported as ``file:line: key: problem``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from a2a_bus.core.routing import RoutingError, subject_matches, validate_name, validate_subject
from a2a_bus.llm.bindings import BindingError, mapped_tool
from a2a_bus.llm.builder import AgentBuilder
from a2a_bus.llm.client import LlmClient
from a2a_bus.llm.errors import AgentConfigError, AgentFileError
from a2a_bus.llm.exit import ExitCondition
from a2a_bus.llm.loop import AgentLoop
from a2a_bus.llm.memory.strategies import parse_memory
from a2a_bus.llm.tools import TOOL_NAME, AgentTool, FunctionTool
from a2a_bus.runtime.modules import ModuleLoadError, import_module, load_file

Path_ = tuple[str, ...]

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
    "id",
    "subscribe",
    "output_topic",
    "bus_tools",
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


class _Document:
    """Parsed data plus the line of every key, for error messages."""

    def __init__(self, file: str, data: Any, lines: dict[Path_, int]) -> None:
        self.file = file
        self.data = data
        self.lines = lines

    def error(self, path: Path_, problem: str) -> AgentFileError:
        line = None
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                break
        return AgentFileError(self.file, line, ".".join(path), problem)


# -- reading ---------------------------------------------------------------


class _KeysAsWritten(yaml.SafeLoader):
    """Mapping keys as the file spells them: ``on:`` and ``1:`` are the names "on" and "1"
    (YAML 1.1 would make them true and 1), as the key lines are recorded."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise yaml.constructor.ConstructorError(
                    None, None, "a key must be a name, not a list or mapping", key_node.start_mark
                )
            if key_node.tag != "tag:yaml.org,2002:merge":  # keep << merges working
                key_node.tag = "tag:yaml.org,2002:str"
        return super().construct_mapping(node, deep)


def _read_yaml(file: str, text: str) -> _Document:
    loader = _KeysAsWritten(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise AgentFileError(file, 1, "", "the file is empty")
        lines: dict[Path_, int] = {(): node.start_mark.line + 1}
        _mark_lines(file, node, (), lines)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise AgentFileError(file, line, "", f"invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise AgentFileError(file, None, "", f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return _Document(file, data, lines)


def _mark_lines(file: str, node: yaml.Node, path: Path_, lines: dict[Path_, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                raise AgentFileError(
                    file, key_node.start_mark.line + 1, ".".join((*path, key)), "duplicate key"
                )
            seen.add(key)
            lines[(*path, key)] = key_node.start_mark.line + 1
            _mark_lines(file, value_node, (*path, key), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, str(index))] = item.start_mark.line + 1
            _mark_lines(file, item, (*path, str(index)), lines)


_TOML_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"^\s*([A-Za-z0-9_.\"' -]+?)\s*=")


def _toml_parts(text: str) -> Path_:
    return tuple(part.strip().strip("\"'") for part in text.split("."))


def _read_toml(file: str, text: str) -> _Document:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise AgentFileError(
            file, int(match.group(1)) if match else None, "", f"invalid TOML: {exc}"
        ) from None
    # tomllib keeps no positions: find the lines of tables and keys by scanning.
    lines: dict[Path_, int] = {(): 1}
    table: Path_ = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TOML_TABLE.match(line)
        if header:
            table = _toml_parts(header.group(1))
            lines.setdefault(table, number)
            continue
        key = _TOML_KEY.match(line)
        if key:
            lines.setdefault((*table, *_toml_parts(key.group(1))), number)
    return _Document(file, data, lines)


# -- validation --------------------------------------------------------------


def _expect(
    doc: _Document, path: Path_, value: Any, kind: type | tuple[type, ...], what: str
) -> Any:
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise doc.error(path, f"expected {what}, got a boolean")
    if not isinstance(value, kind):
        raise doc.error(path, f"expected {what}, got {type(value).__name__}")
    return value


def _build(doc: _Document, base: Path) -> AgentBuilder:
    data = doc.data
    if not isinstance(data, Mapping):
        raise doc.error((), "an agent file must be a mapping of keywords (model, tools, ...)")
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise doc.error(
            (unknown[0],), f"unknown keyword; expected one of {', '.join(sorted(TOP_KEYS))}"
        )
    name = data.get("name", Path(doc.file).name.split(".")[0])
    builder = AgentBuilder(_expect(doc, ("name",), name, str, "a string"))
    # Optional: without it the LLM client's own model is used.
    if data.get("model") is not None:
        builder.model(_expect(doc, ("model",), data["model"], str, "a model id string"))
    if "system_prompt" in data and "system_prompt_file" in data:
        raise doc.error(
            ("system_prompt_file",), "give system_prompt or system_prompt_file, not both"
        )
    if "system_prompt" in data:
        builder.system_prompt(
            _expect(doc, ("system_prompt",), data["system_prompt"], str, "a string")
        )
    if "system_prompt_file" in data:
        rel = _expect(doc, ("system_prompt_file",), data["system_prompt_file"], str, "a path")
        try:
            builder.system_prompt_file(base / rel)
        except AgentConfigError as exc:
            raise doc.error(("system_prompt_file",), str(exc)) from None
    if "max_turns" in data:
        turns = _expect(doc, ("max_turns",), data["max_turns"], int, "an integer")
        if turns < 1:
            raise doc.error(("max_turns",), "must be >= 1")
        builder.max_turns(turns)
    if data.get("max_tool_concurrency") is not None:
        limit = _expect(
            doc, ("max_tool_concurrency",), data["max_tool_concurrency"], int, "an integer"
        )
        if limit < 1:
            raise doc.error(("max_tool_concurrency",), "must be >= 1 (omit it for no limit)")
        builder.max_tool_concurrency(limit)
    if data.get("temperature") is not None:
        temperature = _expect(doc, ("temperature",), data["temperature"], (int, float), "a number")
        if not 0 <= temperature <= 2:
            raise doc.error(("temperature",), "must be between 0 and 2")
        builder.temperature(float(temperature))
    if data.get("tool_timeout") is not None:
        timeout = _expect(doc, ("tool_timeout",), data["tool_timeout"], (int, float), "seconds")
        if timeout <= 0:
            raise doc.error(("tool_timeout",), "must be > 0")
        builder.tool_timeout(float(timeout))
    if "memory" in data:
        try:
            builder.memory(parse_memory(data["memory"]))
        except ValueError as exc:
            raise doc.error(("memory",), str(exc)) from None
    if "streaming" in data:
        builder.streaming(_expect(doc, ("streaming",), data["streaming"], bool, "true or false"))
    if "streaming_buffer_capacity" in data:
        capacity = _expect(
            doc,
            ("streaming_buffer_capacity",),
            data["streaming_buffer_capacity"],
            int,
            "an integer",
        )
        if capacity < 1:
            raise doc.error(("streaming_buffer_capacity",), "must be >= 1")
    if data.get("exit_condition") is not None:
        expression = _expect(doc, ("exit_condition",), data["exit_condition"], str, "an expression")
        try:
            builder.exit_condition(ExitCondition(expression))
        except AgentConfigError as exc:
            raise doc.error(("exit_condition",), str(exc)) from None
    tools = data.get("tools") or {}
    _expect(doc, ("tools",), tools, Mapping, "a mapping of tool name -> tool block")
    for tool_name, block in tools.items():
        builder.tool(_tool(doc, base, str(tool_name), block))
    return builder


def _bus_settings(doc: _Document, name: str) -> BusSettings:
    from a2a_bus.llm.bus_tools import BUS_TOOLS, check_bus_tool

    data = doc.data
    agent_id: str | None = name
    if "id" in data:
        agent_id = _expect(doc, ("id",), data["id"], str, "an agent id string")
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
    _expect(doc, ("description",), description, str, "a string")
    subjects = data.get("subscribe") or []
    if isinstance(subjects, str):
        subjects = [subjects]
    _expect(doc, ("subscribe",), subjects, list, "a subject or a list of subjects")
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
    _expect(doc, ("bus_tools",), tools, (list, tuple), "a list of bus tool names, or true")
    for index, tool_name in enumerate(tools):
        try:
            check_bus_tool(tool_name)
        except ValueError as exc:
            raise doc.error(("bus_tools", str(index)), str(exc)) from None
    return BusSettings(agent_id, description, tuple(subjects), output_topic, tuple(tools))


def _tool(doc: _Document, base: Path, name: str, block: Any) -> AgentTool:
    path: Path_ = ("tools", name)
    if not TOOL_NAME.match(name):
        raise doc.error(path, "tool names use 1-64 of [A-Za-z0-9_-]")
    _expect(doc, path, block, Mapping, "a tool block with description, callable and input")
    unknown = sorted(set(block) - TOOL_KEYS)
    if unknown:
        raise doc.error(
            (*path, unknown[0]),
            f"unknown tool keyword; expected one of {', '.join(sorted(TOOL_KEYS))}",
        )
    if "callable" not in block:
        raise doc.error(path, "missing 'callable' (module:function or path.py:function)")
    reference = _expect(doc, (*path, "callable"), block["callable"], str, "module:function")
    try:
        func = resolve_callable(reference, base)
    except (ImportError, AttributeError, ValueError, OSError) as exc:
        raise doc.error((*path, "callable"), str(exc)) from None
    description = block.get("description")
    if description is not None:
        _expect(doc, (*path, "description"), description, str, "a string")
    blocking = _expect(doc, (*path, "blocking"), block.get("blocking", True), bool, "true or false")
    inputs = block.get("input")
    if inputs is not None:
        _expect(doc, (*path, "input"), inputs, Mapping, "a mapping of parameter -> source")
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
    except BindingError as exc:
        key = (
            (*path, "input", exc.key)
            if inputs is not None and exc.key in inputs
            else (*path, "input")
        )
        raise doc.error(key, str(exc)) from None
    except (TypeError, ValueError) as exc:
        raise doc.error(path, f"cannot make a tool of {reference}: {exc}") from None


# -- callables ---------------------------------------------------------------


def callable_label(reference: str) -> str:
    """How messages name a callable: ``support_tools:search`` and ``./support_tools.py:search``
    are both ``support_tools.search`` (not the internal name a loaded file gets)."""
    target, _, attribute = reference.rpartition(":")
    if _is_path(target):
        target = Path(target).stem
    return f"{target}.{attribute}"


def resolve_callable(reference: str, base: Path) -> Callable[..., Any]:
    """``module:function`` or ``path.py:function`` (relative to ``base``)."""
    target, sep, attribute = reference.rpartition(":")
    if not sep or not target or not attribute:
        raise ValueError(f"expected module:function or path.py:function, got {reference!r}")
    obj: Any = _module(target, base)
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AttributeError(f"{target!r} has no attribute {attribute!r}") from None
    if isinstance(obj, FunctionTool):
        return obj.func
    if not callable(obj):
        raise ValueError(f"{reference!r} is not callable")
    return obj


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def _module(target: str, base: Path) -> ModuleType:
    """The module a callable reference names: a path, an importable module, or else a
    ``.py`` file of that name beside the agent file (``support_tools``)."""
    if _is_path(target):
        return load_file(base / target)
    try:
        return import_module(target)
    except ModuleLoadError as exc:
        local = base / (target.replace(".", "/") + ".py")
        if exc.missing and local.is_file():
            return load_file(local)
        raise


# -- entry points ------------------------------------------------------------


def parse_agent_file(path: str | os.PathLike[str]) -> tuple[AgentBuilder, BusSettings]:
    """Parse and validate an agent file: the builder and the bus settings."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentFileError(str(file), None, "", f"cannot read the file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        problem = (
            f"cannot read the file: not UTF-8 text (byte {exc.object[exc.start]:#x} at {exc.start})"
        )
        raise AgentFileError(str(file), None, "", problem) from None
    doc = _read_toml(str(file), text) if file.suffix == ".toml" else _read_yaml(str(file), text)
    builder = _build(doc, file.parent)
    return builder, _bus_settings(doc, builder.agent_name)


def read_agent_file(path: str | os.PathLike[str]) -> AgentBuilder:
    """Parse and validate an agent file into a builder (add ``.llm(...)``, then build)."""
    return parse_agent_file(path)[0]


def load_agent_file(
    path: str | os.PathLike[str],
    *,
    client: LlmClient | None = None,
    context: Mapping[str, Any] | None = None,
) -> AgentLoop:
    """Build the agent an agent file describes.

    Without ``client``, an :class:`~a2a_bus.llm.openai_client.OpenAIClient`
    configured from the environment serves the file's model.
    """
    builder = read_agent_file(path)
    if client is None:
        from a2a_bus.llm.openai_client import OpenAIClient

        client = OpenAIClient(model=builder.model_name)
    builder.llm(client)
    if context:
        builder.context(context)
    return builder.build()
