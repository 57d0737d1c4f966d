"""Unit tests of parameter binding, schema inference and agent cards."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import pytest

from a2a_bus import Agent, JsonRpcError, method, subscribe
from a2a_bus.schema import schema_for
from a2a_bus.streams import SeqReceiver


@dataclass
class Point:
    x: int
    y: int = 0


class Shapes(Agent):
    """Draws shapes."""

    agent_id = "shapes"

    @method("shape/area")
    def area(self, width: float, height: float = 1.0) -> float:
        """Area of a rectangle."""
        return width * height

    @method
    def tag(self, name: str, tags: list[str] | None = None, mode: Literal["a", "b"] = "a") -> str:
        return name

    @method
    def numbers(self, n: int) -> Iterator[int]:
        yield from range(n)

    @method
    def total(self, values: Iterator[int]) -> int:
        return sum(values)

    @subscribe("orders.*")
    def on_order(self, event: object) -> None:
        pass


def test_positional_and_named_binding_ignores_routing_members() -> None:
    spec = Shapes.methods["shape/area"]
    assert spec.bind([2, 3]).args == (2, 3)
    assert spec.bind({"width": 2, "_agentId": "shapes", "_sessionId": "s"}).arguments == {
        "width": 2
    }


@pytest.mark.parametrize(
    "params",
    [[], [1, 2, 3], {"height": 1}, {"width": 1, "depth": 2}, ["wide"], {"width": True}, "oops"],
)
def test_mismatches_are_invalid_params(params: object) -> None:
    with pytest.raises(JsonRpcError) as error:
        Shapes.methods["shape/area"].bind(params)
    assert error.value.code == -32602


def test_int_accepted_for_float_but_not_bool_for_int() -> None:
    assert Shapes.methods["shape/area"].bind([2, 3]).args == (2, 3)
    with pytest.raises(JsonRpcError):
        Shapes.methods["numbers"].bind([True])
    with pytest.raises(JsonRpcError):
        Shapes.methods["tag"].bind([5])


def test_optional_union_param() -> None:
    spec = Shapes.methods["tag"]
    assert spec.bind(["x", None]).args == ("x", None)
    assert spec.bind(["x", ["a"]]).args == ("x", ["a"])
    with pytest.raises(JsonRpcError):
        spec.bind(["x", "not-a-list"])


class Variadic(Agent):
    agent_id = "variadic"

    @method
    def total(self, *values: int) -> int:
        return sum(values)

    @method
    def labels(self, **labels: str) -> list[str]:
        return sorted(labels)


def test_variadic_params_are_checked_item_by_item() -> None:
    total = Variadic.methods["total"]
    assert total.bind([1, 2, 3]).args == (1, 2, 3)
    assert total.bind([]).args == ()
    with pytest.raises(JsonRpcError) as error:
        total.bind([1, "2", 3])
    assert (error.value.code, error.value.data) == (
        -32602,
        "values[1]: expected {'type': 'integer'}, got str",
    )
    labels = Variadic.methods["labels"]
    assert labels.bind({"a": "x", "b": "y"}).kwargs == {"a": "x", "b": "y"}
    with pytest.raises(JsonRpcError) as error:
        labels.bind({"a": "x", "b": 2})
    assert error.value.data == "b: expected {'type': 'string'}, got int"


def test_card_schemas_from_type_hints() -> None:
    card = Shapes.card()
    assert card["id"] == "shapes"
    assert card["description"] == "Draws shapes."
    assert card["subscriptions"] == ["orders.*"]
    area = next(m for m in card["methods"] if m["name"] == "shape/area")
    assert area == {
        "name": "shape/area",
        "description": "Area of a rectangle.",
        "params": {
            "type": "object",
            "properties": {"width": {"type": "number"}, "height": {"type": "number"}},
            "required": ["width"],
        },
        "result": {"type": "number"},
    }
    tag = next(m for m in card["methods"] if m["name"] == "tag")
    assert tag["params"]["properties"]["tags"] == {
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]
    }
    assert tag["params"]["properties"]["mode"] == {"enum": ["a", "b"]}
    numbers = next(m for m in card["methods"] if m["name"] == "numbers")
    assert (numbers["streaming"], numbers["result"]) == ("response", {"type": "integer"})
    total = next(m for m in card["methods"] if m["name"] == "total")
    assert (total["streaming"], total["streamParam"]) == ("request", "values")


def test_dataclass_schema() -> None:
    assert schema_for(Point) == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x"],
    }


def test_agent_id_must_be_a_valid_name() -> None:
    with pytest.raises(ValueError):
        type("Bad", (Agent,), {"agent_id": "no spaces"})


def test_seq_receiver_orders_drops_repeats_and_reports_gaps() -> None:
    receiver = SeqReceiver()
    assert receiver.accept(0, "a") == ["a"]
    assert receiver.accept(2, "c") == []
    assert receiver.accept(0, "a") == []
    assert receiver.accept(1, "b") == ["b", "c"]
    assert receiver.duplicates == 1
    receiver.finish(3)
    gappy = SeqReceiver()
    gappy.accept(0, "a")
    gappy.accept(2, "c")
    with pytest.raises(JsonRpcError) as error:
        gappy.finish(3)
    assert "gap at seq 1" in str(error.value.data)
