"""Tools: schema inference from hints and docstrings, validation, registry; scripted client."""

from __future__ import annotations

import asyncio
import enum
import math
from typing import Annotated, Literal

import pytest

from a2a_bus.llm import (
    AgentLoop,
    FunctionTool,
    LlmError,
    LlmMessage,
    ScriptedClient,
    ToolCall,
    ToolContext,
    ToolRegistry,
    tool,
)
from a2a_bus.llm.dispatch import execute_call
from a2a_bus.llm.tools import ToolArgumentsError, UnknownToolError

pytestmark = pytest.mark.timeout(60)


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


def forecast(
    city: str,
    days: int = 3,
    unit: Unit = Unit.C,
    detail: Literal["short", "long"] = "short",
    tags: list[str] | None = None,
    ratio: Annotated[float, "share of sunny hours"] = 0.5,
    context: ToolContext | None = None,
) -> dict[str, object]:
    """Weather forecast for a city.

    Longer explanation that is not part of the summary.

    Args:
        city: name of the city,
            possibly with the country
        days: how many days ahead
    """
    return {"city": city, "days": days}


def test_schema_is_inferred_from_hints_and_docstring() -> None:
    made = tool(forecast)
    assert made.name == "forecast"
    assert made.description == "Weather forecast for a city."
    params = made.parameters
    assert params["required"] == ["city"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["city"] == {
        "type": "string",
        "description": "name of the city, possibly with the country",
    }
    assert props["days"] == {"type": "integer", "description": "how many days ahead", "default": 3}
    assert props["unit"] == {"enum": ["celsius", "fahrenheit"]}
    assert props["detail"] == {"enum": ["short", "long"], "default": "short"}
    assert props["tags"] == {
        "type": ["array", "null"],
        "items": {"type": "string"},
        "default": None,
    }
    assert props["ratio"]["description"] == "share of sunny hours"
    assert "context" not in props  # injected, not the model's business


def test_decorator_options_and_direct_calls() -> None:
    @tool(name="sum_two", description="Adds.")
    def add(a: int, b: int) -> int:
        """Ignored summary."""
        return a + b

    assert (add.name, add.description) == ("sum_two", "Adds.")
    assert add(2, 3) == 5  # still a plain function for direct use


def test_validation_names_every_problem() -> None:
    made = tool(forecast)
    with pytest.raises(ToolArgumentsError) as info:
        made.validate({"days": "many", "extra": 1})
    message = str(info.value)
    assert "'city' is a required property" in message
    assert "days: 'many' is not of type 'integer'" in message
    assert "'extra' was unexpected" in message


def test_registry_is_ordered_and_rejects_unknown_and_duplicate_names() -> None:
    registry = ToolRegistry([forecast, tool(name="b")(lambda: 1)])
    assert registry.names() == ["forecast", "b"] and len(registry) == 2
    assert [d.name for d in registry.definitions()] == ["forecast", "b"]
    with pytest.raises(UnknownToolError, match="unknown tool 'x'; available tools: forecast, b"):
        registry.get("x")
    with pytest.raises(ValueError, match="already registered"):
        registry.add(forecast)
    with pytest.raises(ValueError, match="invalid tool name"):
        FunctionTool(forecast, name="has space")


def test_a_tool_whose_schema_has_no_json_form_is_refused_when_made() -> None:
    """The schema goes with every model call: a NaN default failed each one (and
    crashed the agent's actor) instead of the tool's making. A function's own NaN
    default is left out of the schema it is given (as for an agent's card)."""

    def scale(x: float, factor: float = math.nan) -> float:
        """Scale a number."""
        return x * factor

    assert "default" not in tool(scale).parameters["properties"]["factor"]
    given = {"type": "object", "properties": {"factor": {"type": "number", "default": math.nan}}}
    with pytest.raises(ValueError, match="the schema of tool 'scale' has no JSON form"):
        FunctionTool(scale, parameters=given)


def test_async_and_sync_tools_are_invoked_with_context() -> None:
    @tool
    async def who(context: ToolContext) -> str:
        """Async tool."""
        return f"{context.agent}:{context.call_id}"

    registry = ToolRegistry([who])
    result = asyncio.run(execute_call(registry, ToolCall("c9", "who", ""), ToolContext(agent="a")))
    assert result.success and result.content == "a:"  # empty arguments count as {}
    result = asyncio.run(
        execute_call(registry, ToolCall("c9", "who", "{}"), ToolContext(agent="a", call_id="c9"))
    )
    assert result.value == "a:c9" and result.latency_ms >= 0


def test_scripted_client_script_and_rules() -> None:
    scripted = ScriptedClient([ToolCall.of("forecast", {"city": "Bern"}), "Sunny in Bern."])
    agent = AgentLoop(scripted, tools=[forecast])
    output = agent.run("weather in Bern?")
    assert output.content == "Sunny in Bern." and output.turns_used == 2
    assert list(output.tool_results.values()) == [{"city": "Bern", "days": 3}]
    assert scripted.requests[1][-1].role == "tool"
    with pytest.raises(LlmError, match="exhausted"):
        agent.run("again")

    rules = ScriptedClient.from_rules(
        [
            (r"weather", ToolCall.of("forecast", {"city": "Oslo"})),
            (r'"city": "Oslo"', "Cold in Oslo."),
        ],
        default="?",
    )
    tokens = list(rules.stream([LlmMessage.user("hi")]))
    assert tokens[-1].content == "?"  # type: ignore[union-attr]
    output = AgentLoop(rules, tools=[forecast]).run("weather please")
    assert output.content == "Cold in Oslo."


def test_benchmark_reports_each_case_against_the_budget_and_by_hand() -> None:
    from a2a_bus.bench.llm import TARGET_US, run

    report = run(quick=True, turns=3)
    budget, by_hand = report.rows[:5], report.rows[5:]
    assert len(by_hand) == 5 and all(row.value > 0 for row in report.rows)
    assert all(row.baseline == TARGET_US and row.met is not None for row in budget)
    assert {row.baseline for row in by_hand} == {by_hand[0].baseline} and by_hand[0].baseline
    assert all(row.met is None for row in by_hand)  # for information only
