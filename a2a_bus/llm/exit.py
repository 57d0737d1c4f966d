"""``exit_condition``: a safe expression checked after each tool round.

Expressions are evaluated by ``simpleeval`` (never ``eval``) over the variables
``finish_reason``, ``content``, ``turn``, ``tool_calls``, ``tool_results`` and
``messages``, with a ``tool_call("name")`` helper. Both Python (``and``, ``or``,
``not``) and the DSL spellings (``&&``, ``||``, ``!``) are accepted, as are
``true``/``false``/``null``.
"""

from __future__ import annotations

import ast
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from simpleeval import EvalWithCompoundTypes, InvalidExpression

from a2a_bus.llm.dispatch import ToolResult
from a2a_bus.llm.errors import ExitConditionError
from a2a_bus.llm.messages import ChatResponse, LlmMessage, ToolCall

log = logging.getLogger(__name__)

VARIABLES = ("finish_reason", "content", "turn", "tool_calls", "tool_results", "messages")
FUNCTIONS = ("tool_call", "len", "str", "int", "any", "all")
_CONSTANTS = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
}

# String literals are matched first so operators inside quotes stay untouched.
_TOKENS = re.compile(r"""("(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')|(\|\||&&|!(?!=))""")
_WORDS = {"||": " or ", "&&": " and ", "!": " not "}
# What the run's data can make an expression raise. simpleeval reports a missing
# attribute (``tool_results.x``) as InvalidExpression; unknown names and bad syntax,
# its other InvalidExpressions, were refused at build time.
_RUN_TIME_FAILURES = (
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    ValueError,
    ArithmeticError,
    InvalidExpression,
)


def normalize(expression: str) -> str:
    """Rewrite the DSL operators ``||``, ``&&`` and ``!`` to Python's."""

    def swap(match: re.Match[str]) -> str:
        return match.group(1) or _WORDS[match.group(2)]

    return _TOKENS.sub(swap, expression).strip()


class ExitCondition:
    """A compiled exit condition; invalid expressions fail here, at build time."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.source = normalize(expression)
        if not self.source:
            raise ExitConditionError("exit_condition is empty")
        try:
            self._tree = ast.parse(self.source, mode="eval")
        except SyntaxError as exc:
            raise ExitConditionError(
                f"invalid exit_condition {expression!r}: {exc.msg} at column {exc.offset}"
            ) from None
        known = set(VARIABLES) | set(FUNCTIONS) | set(_CONSTANTS)
        for node in ast.walk(self._tree):
            if isinstance(node, ast.Name) and node.id == "tool_args":
                raise ExitConditionError(
                    f"invalid exit_condition {expression!r}: tool_args is only available "
                    "inside a tool's input mapping"
                )
            if isinstance(node, ast.Name) and node.id not in known:
                raise ExitConditionError(
                    f"invalid exit_condition {expression!r}: unknown name {node.id!r}; "
                    f'use {", ".join(VARIABLES)} or tool_call("name")'
                )
            if isinstance(node, ast.Lambda | ast.comprehension):
                raise ExitConditionError(
                    f"invalid exit_condition {expression!r}: "
                    "lambdas and comprehensions are not allowed"
                )

    def __repr__(self) -> str:
        return f"ExitCondition({self.expression!r})"

    def evaluate(
        self,
        *,
        finish_reason: str,
        content: str,
        turn: int,
        tool_calls: Sequence[Mapping[str, Any]],
        tool_results: Mapping[str, Any],
        messages: Sequence[Mapping[str, Any]],
    ) -> bool:
        """True when the loop should stop.

        A lookup that fails at run time (a tool result key not produced this
        turn, with brackets or a dot, say) or arithmetic that fails counts as
        false, so the loop simply goes on.
        """
        called = {call.get("name") for call in tool_calls}
        evaluator = EvalWithCompoundTypes(
            names={
                **_CONSTANTS,
                "finish_reason": finish_reason,
                "content": content,
                "turn": turn,
                "tool_calls": tool_calls,
                "tool_results": tool_results,
                "messages": messages,
            },
            functions={
                "tool_call": lambda name: name in called,
                "len": len,
                "str": str,
                "int": int,
                "any": any,
                "all": all,
            },
        )
        try:
            return bool(evaluator.eval(self.source, previously_parsed=self._tree.body))
        except _RUN_TIME_FAILURES as exc:
            log.debug("exit_condition %r evaluated as false: %r", self.expression, exc)
            return False

    def reached(
        self,
        response: ChatResponse,
        turn: int,
        results: list[ToolResult],
        messages: list[LlmMessage],
    ) -> bool:
        """Whether the turn that got ``response`` and ran its tools (``results``)
        ends the run; ``messages``: the conversation so far."""
        calls = [
            {"id": call.id, "name": call.name, "arguments": _arguments(call)}
            for call in response.tool_calls
        ]
        by_name = {result.call.name: result.value for result in results}
        return self.evaluate(
            finish_reason=response.finish_reason,
            content=response.content,
            turn=turn,
            tool_calls=calls,
            tool_results=by_name,
            messages=[m.to_dict() for m in messages],
        )


def _arguments(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments
