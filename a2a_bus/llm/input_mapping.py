"""Tool input mappings: how a tool's parameters are filled at dispatch.

In an input mapping each entry names a parameter of the tool's function and
says where its value comes from:

* ``tool_args.<field>``: from the model's arguments; every such field becomes
  a required parameter of the schema the model sees;
* ``ctx.<name>`` (dots for nested values): from the agent's context, given at
  build or run time; invisible to the model;
* anything else: a constant.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from a2a_bus.hosting.schema import parse_docstring, schema_for
from a2a_bus.llm.tools import FunctionTool, ToolContext, is_context_hint

_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class InputSource:
    """Where one parameter's value comes from."""

    kind: str  # "tool_args", "ctx" or "const"
    path: tuple[str, ...] = ()
    value: Any = None


class InputMappingError(ValueError):
    """An input mapping that cannot work; ``key`` names the offending entry."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(problem)
        self.key = key


def parse_source(value: Any) -> InputSource:
    if isinstance(value, str):
        text = value.strip()
        for source in ("tool_args", "ctx"):
            if text == source or text.startswith(source + "."):
                path = tuple(text.split(".")[1:])
                if not path or not all(_FIELD.match(part) for part in path):
                    raise ValueError(f"{text!r} must look like {source}.<name>")
                if source == "tool_args" and len(path) > 1:
                    raise ValueError(
                        f"{text!r}: only top-level tool_args fields are supported "
                        "(take the object as tool_args.<field> and read it in the function)"
                    )
                return InputSource(source, path)
    return InputSource("const", value=value)


def lookup(values: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    current: Any = values
    for index, part in enumerate(path):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        else:
            name = "ctx." + ".".join(path[: index + 1])
            raise LookupError(f"context value {name} is not set; pass it in the agent's context")
    return current


def mapped_tool(
    func: Callable[..., Any],
    inputs: Mapping[str, Any],
    *,
    name: str,
    description: str | None = None,
    blocking: bool = True,
    label: str | None = None,
) -> FunctionTool:
    """A tool whose parameters are filled by ``inputs`` (see the module doc).

    Raises :class:`InputMappingError` when the mapping does not fit the function, naming
    it ``label`` (default: its module and qualified name).
    """
    label = label or _qualname(func)
    signature = inspect.signature(func)
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except (NameError, TypeError):
        hints = {}
    params = signature.parameters
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    summary, docs = parse_docstring(inspect.getdoc(func))
    sources: dict[str, InputSource] = {}
    properties: dict[str, Any] = {}
    for param_name, raw in inputs.items():
        if param_name not in params and not takes_kwargs:
            raise InputMappingError(param_name, f"{label} has no parameter {param_name!r}")
        try:
            source = parse_source(raw)
        except ValueError as exc:
            raise InputMappingError(param_name, str(exc)) from None
        sources[param_name] = source
        if source.kind == "tool_args":
            field = source.path[0]
            if field in properties:
                raise InputMappingError(param_name, f"tool_args.{field} is mapped twice")
            param = params.get(param_name)
            schema = schema_for(hints.get(param_name, param.annotation if param else Any))
            if param_name in docs and "description" not in schema:
                schema["description"] = docs[param_name]
            properties[field] = schema
    context_param = next(
        (p for p in params if is_context_hint(hints.get(p, params[p].annotation))),
        None,
    )
    for param in params.values():
        if (
            param.name not in sources
            and param.name != context_param
            and param.default is param.empty
            and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
        ):
            raise InputMappingError(
                param.name,
                f"required parameter {param.name!r} of {label} is not in the input mapping",
            )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if properties:
        parameters["required"] = list(properties)

    def bind(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for param_name, source in sources.items():
            if source.kind == "tool_args":
                kwargs[param_name] = arguments[source.path[0]]
            elif source.kind == "ctx":
                kwargs[param_name] = lookup(context.context, source.path)
            else:
                kwargs[param_name] = source.value
        return kwargs

    return FunctionTool(
        func,
        name=name,
        description=description if description is not None else summary,
        parameters=parameters,
        blocking=blocking,
        bind=bind,
    )


def _qualname(func: Callable[..., Any]) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', func)}"
