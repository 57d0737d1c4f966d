"""Tools: ``AgentTool`` (name, description, JSON Schema, invoke), ``ToolRegistry``
and the ``@tool`` decorator that makes a tool out of a typed Python function.
"""

from __future__ import annotations

import abc
import asyncio
import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

import jsonschema
from jsonschema.protocols import Validator

from a2a_bus.hosting.schema import function_schema
from a2a_bus.llm.messages import ToolDefinition

#: OpenAI's rule for function names.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: Context keys under which a bus host passes its client and agent id to tools.
BUS_CLIENT_KEY = "a2a_bus.client"
BUS_AGENT_KEY = "a2a_bus.agent_id"


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may know about the call it serves.

    A function tool receives it through a parameter annotated ``ToolContext``;
    that parameter is not part of the schema the model sees.
    """

    agent: str = "agent"
    conversation: str | None = None
    turn: int = 0
    call_id: str = ""
    execution_id: str = ""
    #: Values bound by the application (build-time context merged with run-time context).
    context: Mapping[str, Any] = field(default_factory=dict)

    @property
    def bus(self) -> Any:
        """The bus client (:class:`a2a_bus.Client`) when the agent runs on a bus, else None.

        Sync tools call ``context.bus.request(...)``; async ones ``await context.bus.aio...``.
        """
        return self.context.get(BUS_CLIENT_KEY)

    @property
    def bus_agent_id(self) -> str | None:
        """The id of the bus agent running this call, when on a bus."""
        return self.context.get(BUS_AGENT_KEY)


class ToolArgumentsError(ValueError):
    """The model's arguments do not match the tool's schema."""


class UnknownToolError(LookupError):
    """No tool is registered under the requested name."""

    def __init__(self, name: str, available: Iterable[str]) -> None:
        names = ", ".join(available) or "(none)"
        super().__init__(f"unknown tool {name!r}; available tools: {names}")
        self.name = name


class AgentTool(abc.ABC):
    """A capability the model can call: name, description, JSON Schema, invoke."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        *,
        validator: Callable[[Mapping[str, Any]], Validator] = jsonschema.Draft202012Validator,
    ) -> None:
        """``validator`` makes the check of a model's arguments from ``parameters``
        (JSON Schema 2020-12 by default; a tool whose schema comes from outside may
        leave out what it cannot check safely)."""
        if not TOOL_NAME.match(name):
            raise ValueError(f"invalid tool name {name!r}: use 1-64 of [A-Za-z0-9_-]")
        jsonschema.Draft202012Validator.check_schema(parameters)
        try:  # sent with every model call: a NaN default would fail each one
            json.dumps(parameters, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the schema of tool {name!r} has no JSON form: {exc}") from None
        self.name = name
        self.description = description
        self.parameters = parameters
        self._validator = validator(parameters)

    def definition(self) -> ToolDefinition:
        return ToolDefinition(self.name, self.description, self.parameters)

    def validate(self, arguments: Any) -> None:
        """Raise ``ToolArgumentsError`` naming every problem with ``arguments``."""
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
        if errors:
            problems = "; ".join(
                f"{'/'.join(map(str, e.path)) or '(arguments)'}: {e.message}" for e in errors
            )
            raise ToolArgumentsError(f"invalid arguments for tool {self.name!r}: {problems}")

    @abc.abstractmethod
    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Run the tool with validated arguments; the result goes back to the model."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def is_context_hint(hint: Any) -> bool:
    """True for ``ToolContext`` and ``ToolContext | None`` (the injected parameter)."""
    if hint is ToolContext or hint == "ToolContext":
        return True
    return ToolContext in typing.get_args(hint)


def _is_context_param(param: inspect.Parameter, hint: Any) -> bool:
    return is_context_hint(hint)


class FunctionTool(AgentTool):
    """A tool backed by a Python function, sync or async.

    Sync functions run in a worker thread (``blocking=True``, the default) so a
    slow tool never stalls the event loop and tools of one turn can overlap; pass
    ``blocking=False`` for quick pure functions to run them inline.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        blocking: bool = True,
        bind: Callable[[dict[str, Any], ToolContext], dict[str, Any]] | None = None,
    ) -> None:
        summary, inferred = function_schema(func, skip=_is_context_param)
        super().__init__(
            name or func.__name__,
            description if description is not None else summary,
            parameters if parameters is not None else inferred,
        )
        self.func = func
        self.blocking = blocking
        self._bind = bind
        self._is_async = inspect.iscoroutinefunction(func)
        try:
            hints = typing.get_type_hints(func)
        except (NameError, TypeError):
            hints = {}
        self._context_param = next(
            (
                param.name
                for param in inspect.signature(func).parameters.values()
                if _is_context_param(param, hints.get(param.name, param.annotation))
            ),
            None,
        )

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        kwargs = self._bind(arguments, context) if self._bind is not None else dict(arguments)
        if self._context_param is not None:
            kwargs[self._context_param] = context
        if self._is_async:
            return await self.func(**kwargs)
        if self.blocking:
            result = await asyncio.to_thread(self.func, **kwargs)
        else:
            result = self.func(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (the decorator keeps it usable)."""
        return self.func(*args, **kwargs)


@overload
def tool(func: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, blocking: bool = True
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    blocking: bool = True,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool of a typed function; the schema comes from hints and docstring.

    Use as ``@tool`` or ``@tool(name=..., description=..., blocking=...)``.
    """

    def make(target: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(target, name=name, description=description, blocking=blocking)

    return make(func) if func is not None else make


class ToolRegistry:
    """Tools in registration order, looked up by name."""

    def __init__(self, tools: Iterable[AgentTool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, AgentTool] = {}
        self._definitions: list[ToolDefinition] | None = None
        for item in tools:
            self.add(item)

    def add(self, item: AgentTool | Callable[..., Any], *, replace: bool = False) -> AgentTool:
        """Register a tool (a plain function is wrapped with ``@tool``)."""
        agent_tool = item if isinstance(item, AgentTool) else FunctionTool(item)
        if agent_tool.name in self._tools and not replace:
            raise ValueError(f"a tool named {agent_tool.name!r} is already registered")
        self._tools[agent_tool.name] = agent_tool
        self._definitions = None
        return agent_tool

    def get(self, name: str) -> AgentTool:
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError(name, self._tools) from None

    def definitions(self) -> list[ToolDefinition]:
        if self._definitions is None:
            self._definitions = [t.definition() for t in self._tools.values()]
        return self._definitions

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[AgentTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names()!r})"
