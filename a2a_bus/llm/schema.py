"""JSON Schema inference from Python type hints and docstrings."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from collections import abc
from collections.abc import Callable
from typing import Any

_JSON_TYPES: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
    tuple: "array",
    set: "array",
    frozenset: "array",
}


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of one type hint (an empty schema accepts anything)."""
    if hint is inspect.Parameter.empty or hint is Any or hint is object:
        return {}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema = type_schema(args[0])
        for extra in args[1:]:
            if isinstance(extra, str):
                schema["description"] = extra
        return schema
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        nullable = len(options) < len(args)
        schema = (
            type_schema(options[0])
            if len(options) == 1
            else {"anyOf": [type_schema(a) for a in options]}
        )
        if nullable:
            schema = _allow_null(schema)
        return schema
    if (
        isinstance(origin, type)
        and issubclass(origin, abc.Sequence | abc.Set)
        and origin is not str
    ):
        if origin is tuple:
            item = args[0] if len(args) == 2 and args[1] is Ellipsis else None
        else:
            item = args[0] if args else None
        array: dict[str, Any] = {"type": "array"}
        if item is not None:
            array["items"] = type_schema(item)
        return array
    if isinstance(origin, type) and issubclass(origin, abc.Mapping):
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = type_schema(args[1])
        return schema
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return {"enum": [member.value for member in hint]}
        if issubclass(hint, bool):
            return {"type": "boolean"}
        for python_type, json_type in _JSON_TYPES.items():
            if issubclass(hint, python_type):
                return {"type": json_type}
        if dataclasses.is_dataclass(hint) or typing.is_typeddict(hint):
            return {"type": "object"}
    return {}


def _allow_null(schema: dict[str, Any]) -> dict[str, Any]:
    if not schema:
        return schema
    if isinstance(schema.get("type"), str):
        return {**schema, "type": [schema["type"], "null"]}
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    if "enum" in schema:
        return {**schema, "enum": [*schema["enum"], None]}
    return {"anyOf": [schema, {"type": "null"}]}


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Summary and parameter descriptions (Google ``Args:`` or Sphinx ``:param``)."""
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    params: dict[str, str] = {}
    for match in re.finditer(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.+?)(?=^:|\Z)", text, re.M | re.S):
        params[match.group(1)] = " ".join(match.group(2).split())
    section = re.search(r"^(?:Args|Arguments|Parameters):\s*\n((?:[ \t]+.*\n?|\s*\n)+)", text, re.M)
    if section:
        current: str | None = None
        for line in section.group(1).splitlines():
            entry = re.match(r"^\s{0,8}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if entry and (current is None or _indent(line) <= _indent_of_first(section.group(1))):
                current = entry.group(1).lstrip("*")
                params[current] = entry.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    summary_lines: list[str] = []
    for line in text.splitlines():
        if (
            not line.strip()
            or line.startswith(":")
            or re.match(r"^(Args|Arguments|Parameters|Returns|Raises|Example|Examples):", line)
        ):
            break
        summary_lines.append(line.strip())
    return " ".join(summary_lines), params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _indent_of_first(block: str) -> int:
    for line in block.splitlines():
        if line.strip():
            return _indent(line)
    return 0


def function_schema(
    func: Callable[..., Any], *, skip: Callable[[inspect.Parameter, Any], bool] | None = None
) -> tuple[str, dict[str, Any]]:
    """The summary and parameters schema of a function.

    Parameters for which ``skip(param, hint)`` is true (injected ones) are left out.
    """
    signature = inspect.signature(func)
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except (NameError, TypeError):
        hints = {}
    summary, descriptions = parse_docstring(inspect.getdoc(func))
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = hints.get(name, param.annotation)
        if skip is not None and skip(param, hint):
            continue
        schema = type_schema(hint)
        if name in descriptions and "description" not in schema:
            schema["description"] = descriptions[name]
        if param.default is not param.empty:
            if _jsonable(param.default):
                schema["default"] = param.default
        else:
            required.append(name)
        properties[name] = schema
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        parameters["required"] = required
    return summary, parameters


def _jsonable(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
