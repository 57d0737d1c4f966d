"""How a model's arguments are checked against an MCP server's tool schema.

As JSON Schema, but for its regular expressions (``pattern``, ``patternProperties``),
which the server checks: Python's ``re`` backtracks, and a hostile pattern such as
``^(a+)+$`` would hold the agent's loop for hours on one argument. The jsonschema
library calls ``re`` itself with no hook for another engine, so the keywords are
left out rather than checked with a safer one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
from jsonschema.protocols import Validator

_DRAFT = jsonschema.Draft202012Validator


def _unchecked(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """A keyword the server checks, not the agent."""
    return iter(())


def _additional_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
    if "patternProperties" in schema:  # which names are additional takes the patterns
        return iter(())
    return _DRAFT.VALIDATORS["additionalProperties"](validator, value, instance, schema)


#: JSON Schema but for the regular expressions (see the module docstring).
_ARGUMENTS = jsonschema.validators.extend(
    _DRAFT,
    {
        "pattern": _unchecked,
        "patternProperties": _unchecked,
        "additionalProperties": _additional_properties,
    },
)
#: For a schema with ``patternProperties``: what ``unevaluatedProperties`` allows takes them.
_ARGUMENTS_NO_UNEVALUATED = jsonschema.validators.extend(
    _ARGUMENTS, {"unevaluatedProperties": _unchecked}
)


def _mentions(schema: Any, keyword: str) -> bool:
    """Whether ``keyword`` is a key anywhere in ``schema`` (a property of that name too)."""
    if isinstance(schema, dict):
        return keyword in schema or any(_mentions(value, keyword) for value in schema.values())
    if isinstance(schema, list):
        return any(_mentions(value, keyword) for value in schema)
    return False


def arguments_validator(schema: Mapping[str, Any]) -> Validator:
    """The validator of a model's arguments for a tool whose input schema is ``schema``."""
    patterned = _mentions(schema, "patternProperties")
    return (_ARGUMENTS_NO_UNEVALUATED if patterned else _ARGUMENTS)(schema)
