"""JSON Schemas inferred from Python type hints (for agent cards and param checks)."""

from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing
from typing import Any

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
    bytes: {"type": "string", "contentEncoding": "base64"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}
_ARRAYS = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Iterable)
_STREAMS = (collections.abc.Iterator, collections.abc.Iterable, collections.abc.Generator)


def schema_for(annotation: Any) -> dict[str, Any]:
    """The JSON Schema for a type hint; ``{}`` (anything) when it cannot say more."""
    if annotation is typing.Any or annotation is object:
        return {}
    if annotation in _PRIMITIVES:
        return dict(_PRIMITIVES[annotation])
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [schema_for(a) for a in args]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if annotation in (dict, collections.abc.Mapping) or origin in (dict, collections.abc.Mapping):
        schema: dict[str, Any] = {"type": "object"}
        if len(args) == 2 and args[1] is not typing.Any:
            schema["additionalProperties"] = schema_for(args[1])
        return schema
    if annotation in _ARRAYS or origin in _ARRAYS or origin in _STREAMS:
        schema = {"type": "array"}
        if origin is tuple and args and args[-1] is not Ellipsis:
            schema["prefixItems"] = [schema_for(a) for a in args]
        elif args:
            schema["items"] = schema_for(args[0])
        return schema
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        hints = typing.get_type_hints(annotation)
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
        hints = typing.get_type_hints(annotation)
        return {
            "type": "object",
            "properties": {name: schema_for(hint) for name, hint in hints.items()},
            "required": sorted(annotation.__required_keys__),
        }
    return {}


def stream_item_type(annotation: Any) -> Any | None:
    """``Iterator[int]`` -> ``int``: the item type when a hint is a stream, else None."""
    origin = typing.get_origin(annotation)
    if annotation in _STREAMS or origin in _STREAMS:
        args = typing.get_args(annotation)
        return args[0] if args else Any
    return None


def checker(annotation: Any) -> typing.Callable[[Any], bool] | None:
    """A fast membership test for simple hints; None when the hint is not checked."""
    if annotation is int:
        return lambda v: type(v) is int
    if annotation is float:
        return lambda v: type(v) in (int, float)
    if annotation is str:
        return lambda v: type(v) is str
    if annotation is bool:
        return lambda v: type(v) is bool
    if annotation in (list, dict):
        return lambda v: type(v) is annotation
    origin = typing.get_origin(annotation)
    if origin in (list, dict):
        return lambda v: type(v) is origin
    if origin in (typing.Union, types.UnionType):
        parts = [checker(a) for a in typing.get_args(annotation)]
        if any(p is None for p in parts):
            return None
        known = typing.cast(list[typing.Callable[[Any], bool]], parts)
        return lambda v: any(p(v) for p in known)
    if annotation is type(None) or annotation is None:
        return lambda v: v is None
    return None
