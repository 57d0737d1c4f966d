"""JSON Schemas inferred from Python type hints and docstrings.

One implementation for agent cards (method params and results), parameter
checks when binding JSON-RPC params, and LLM tool definitions.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

_ARRAYS = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Set)
_STREAMS = (collections.abc.Iterator, collections.abc.Iterable, collections.abc.Generator)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
#: Checked in order: ``bool`` before ``int`` (a bool is an int to Python, not to JSON).
_SCALARS: tuple[tuple[type, dict[str, Any]], ...] = (
    (bool, {"type": "boolean"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (str, {"type": "string"}),
    (bytes, {"type": "string", "contentEncoding": "base64"}),
)
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Examples?):", re.M)


def schema_for(annotation: Any) -> dict[str, Any]:
    """The JSON Schema for a type hint; ``{}`` (anything) when it cannot say more.

    ``T | None`` is ``{"type": [T's type, "null"]}``; ``Annotated[T, "text"]``
    adds ``"description": "text"``; enums list their values; dataclasses and
    TypedDicts describe their fields.
    """
    if annotation is typing.Any or annotation is object or annotation is inspect.Parameter.empty:
        return {}
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        schema = schema_for(args[0])
        for extra in args[1:]:
            if isinstance(extra, str):
                schema["description"] = extra
        return schema
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        schema = (
            schema_for(options[0])
            if len(options) == 1
            else {"anyOf": [schema_for(a) for a in options]}
        )
        return _allow_null(schema) if len(options) < len(args) else schema
    if annotation in _MAPPINGS or origin in _MAPPINGS:
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not typing.Any:
            schema["additionalProperties"] = schema_for(args[1])
        return schema
    if annotation in _ARRAYS or annotation in _STREAMS or origin in _ARRAYS or origin in _STREAMS:
        schema = {"type": "array"}
        if origin is tuple and args and args[-1] is not Ellipsis:
            schema["prefixItems"] = [schema_for(a) for a in args]
        elif args and args[0] is not typing.Any:
            schema["items"] = schema_for(args[0])
        return schema
    if not isinstance(annotation, type):
        return {}
    if issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    for python_type, scalar in _SCALARS:
        if issubclass(annotation, python_type):
            return dict(scalar)
    if dataclasses.is_dataclass(annotation):
        hints = _hints(annotation)
        fields = dataclasses.fields(annotation)
        return {
            "type": "object",
            "properties": {f.name: schema_for(hints.get(f.name, Any)) for f in fields},
            "required": [
                f.name
                for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            ],
        }
    if typing.is_typeddict(annotation):
        hints = _hints(annotation)
        return {
            "type": "object",
            "properties": {name: schema_for(hint) for name, hint in hints.items()},
            "required": sorted(getattr(annotation, "__required_keys__", ())),
        }
    return {}


def _allow_null(schema: dict[str, Any]) -> dict[str, Any]:
    if not schema:
        return schema  # anything already includes null
    if isinstance(schema.get("type"), str):
        return {**schema, "type": [schema["type"], "null"]}
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    if "enum" in schema:
        return {**schema, "enum": [*schema["enum"], None]}
    return {"anyOf": [schema, {"type": "null"}]}


def _hints(obj: Any, *, extras: bool = False) -> dict[str, Any]:
    """Resolved type hints; ``{}`` when forward references cannot be resolved."""
    try:
        return typing.get_type_hints(obj, include_extras=extras)
    except Exception:  # NameError, TypeError: describe as "anything"
        return {}


def stream_item_type(annotation: Any) -> Any | None:
    """``Iterator[int]`` -> ``int``: the item type when a hint is a stream, else None."""
    origin = typing.get_origin(annotation)
    if annotation in _STREAMS or origin in _STREAMS:
        args = typing.get_args(annotation)
        return args[0] if args else Any
    return None


def accepted_types(annotation: Any) -> frozenset[type] | None:
    """The exact types a JSON value of a simple hint may have (``type(v) in ...``,
    no call); None when the hint is not checked."""
    if typing.get_origin(annotation) is typing.Annotated:
        return accepted_types(typing.get_args(annotation)[0])
    if annotation is float:
        return frozenset({int, float})
    if annotation in (int, str, bool, list, dict):  # a bool is no int to JSON
        return frozenset({annotation})
    origin = typing.get_origin(annotation)
    if origin in (list, dict):
        return frozenset({origin})
    if origin in (typing.Union, types.UnionType):
        parts = [accepted_types(a) for a in typing.get_args(annotation)]
        if any(p is None for p in parts):
            return None
        return frozenset().union(*typing.cast(list[frozenset[type]], parts))
    if annotation is type(None) or annotation is None:
        return frozenset({type(None)})
    return None


#: Finds the first item of a value that does not fit a hint: ``(value, label)`` ->
#: ``(the item's label, the hint it misses, the item)``, or None when all fit.
ItemCheck = Callable[[Any, str], "tuple[str, Any, Any] | None"]


def item_check(annotation: Any) -> ItemCheck | None:
    """The check of the items of a container hint (``list[T]``, ``dict[str, T]``, a
    stream ``Iterator[T]`` sent as one array, nested, optional or annotated), for
    the items :func:`accepted_types` can check; None when there is nothing to check.

    Only a value that is a JSON array (or object, for a dict) is looked into: the
    value's own type is :func:`accepted_types`' to check.
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return item_check(args[0])
    if origin in (typing.Union, types.UnionType):
        checks = [check for a in args if (check := item_check(a)) is not None]
        return checks[0] if len(checks) == 1 else None  # one container in the union
    if origin is list or origin in _STREAMS:
        return _each(args[0], _list_items) if args else None
    if origin is dict and len(args) == 2:
        return _each(args[1], _dict_items)
    return None


def _list_items(value: Any, label: str) -> Iterable[tuple[str, Any]]:
    return ((f"{label}[{i}]", item) for i, item in enumerate(value)) if type(value) is list else ()


def _dict_items(value: Any, label: str) -> Iterable[tuple[str, Any]]:
    return ((f"{label}[{k!r}]", item) for k, item in value.items()) if type(value) is dict else ()


def value_check(annotation: Any) -> ItemCheck | None:
    """The check of one value against a hint: its own type (:func:`accepted_types`)
    and its items (:func:`item_check`); None when the hint checks nothing."""
    types_ = accepted_types(annotation)
    nested = item_check(annotation)
    if types_ is None and nested is None:
        return None  # Any, or a hint not checked

    def check(value: Any, label: str) -> tuple[str, Any, Any] | None:
        if types_ is not None and type(value) not in types_:
            return label, annotation, value
        return None if nested is None else nested(value, label)

    return check


def _each(item: Any, items: Callable[[Any, str], Iterable[tuple[str, Any]]]) -> ItemCheck | None:
    check_item = value_check(item)
    if check_item is None:
        return None

    def check(value: Any, label: str) -> tuple[str, Any, Any] | None:
        for where, value_item in items(value, label):
            if (misfit := check_item(value_item, where)) is not None:
                return misfit
        return None

    return check


# -- docstrings and signatures ---------------------------------------------------------


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (first paragraph) and parameter descriptions of a docstring
    (Google ``Args:`` or Sphinx ``:param name:`` style)."""
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    params: dict[str, str] = {}
    for match in re.finditer(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.+?)(?=^:|\Z)", text, re.M | re.S):
        params[match.group(1)] = " ".join(match.group(2).split())
    section = re.search(r"^(?:Args|Arguments|Parameters):\s*\n((?:[ \t]+.*\n?|\s*\n)+)", text, re.M)
    if section:
        block = section.group(1)
        first_indent = next((_indent(line) for line in block.splitlines() if line.strip()), 0)
        current: str | None = None
        for line in block.splitlines():
            entry = re.match(r"^\s{0,8}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if entry and _indent(line) <= first_indent:
                current = entry.group(1).lstrip("*")
                params[current] = entry.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    summary: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith(":") or _SECTION.match(line):
            break
        summary.append(line.strip())
    return " ".join(summary), params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parameters_schema(
    parameters: Iterable[inspect.Parameter],
    hints: Mapping[str, Any],
    descriptions: Mapping[str, str] | None = None,
    *,
    optional: Collection[str] = (),
    closed: bool = False,
) -> dict[str, Any]:
    """The object schema of named parameters (``*args``/``**kwargs`` are left out).

    Each property has the hint's schema, the docstring's description and a JSON
    default; parameters without a default are required unless in ``optional``.
    ``closed`` adds ``"additionalProperties": false``.
    """
    descriptions = descriptions or {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        name = parameter.name
        schema = schema_for(hints.get(name, parameter.annotation))
        if name in descriptions and "description" not in schema:
            schema["description"] = descriptions[name]
        if parameter.default is not parameter.empty:
            if _is_json_scalar(parameter.default):
                schema["default"] = parameter.default
        elif name not in optional:
            required.append(name)
        properties[name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if closed:
        result["additionalProperties"] = False
    return result


def function_schema(
    func: Callable[..., Any], *, skip: Callable[[inspect.Parameter, Any], bool] | None = None
) -> tuple[str, dict[str, Any]]:
    """The docstring summary and the closed parameters schema of ``func`` (LLM tools).

    Parameters for which ``skip(parameter, hint)`` is true (injected ones) are left out.
    """
    hints = _hints(func, extras=True)
    summary, descriptions = parse_docstring(inspect.getdoc(func))
    parameters = [
        p
        for p in inspect.signature(func).parameters.values()
        if skip is None or not skip(p, hints.get(p.name, p.annotation))
    ]
    return summary, parameters_schema(parameters, hints, descriptions, closed=True)


def _is_json_scalar(value: Any) -> bool:
    """Whether ``value`` is a default a card (and an LLM's tool list) can carry: a
    NaN, an infinity, an integer past 64 bits or a lone surrogate has no form on the
    bus, and shown as a default it would fail every card read and publish."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**64
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return value.isascii() or not _SURROGATE.search(value)
    return False


_SURROGATE = re.compile("[\ud800-\udfff]")
