"""Parameter binding (unit tests, and a request through a bus), schemas and agent cards."""

from __future__ import annotations

import asyncio
import enum
import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import orjson
import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method, subscribe
from a2a_bus.core.streams import SeqReceiver
from a2a_bus.hosting.agent import UnresolvedHints
from a2a_bus.hosting.schema import function_schema, parse_docstring, schema_for
from tests.buses import make_bus

__all__ = ["make_bus"]  # the fixture: the request through a bus runs on both transports

WAIT = 30.0  # bound on a single await, not a performance assertion
MakeBus = Callable[..., Awaitable[Bus]]


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


class Typed(Agent):
    agent_id = "typed"

    @method
    def mix(self, count: int, label: str | None, ratio: float = 1.0, flag: bool = False) -> int:
        return count


_ACCEPTS = ({int}, {str, type(None)}, {int, float}, {bool})


@pytest.mark.parametrize("length", range(6))
def test_every_array_of_params_is_checked_position_by_position(length: int) -> None:
    samples: list[Any] = [1, 2.5, True, "s", None, [1], {"a": 1}]
    spec = Typed.methods["mix"]
    for params in itertools.product(samples, repeat=length):
        fits = 2 <= length <= 4 and all(
            type(value) in accepts for value, accepts in zip(params, _ACCEPTS, strict=False)
        )
        try:
            assert spec.bind(list(params)).args == params
            spec.binder.caller("mix", list(params))
        except JsonRpcError as error:
            assert not fits, params
            assert error.code == -32602
        else:
            assert fits, params


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


class Containers(Agent):
    agent_id = "containers"

    @method
    def mean(self, values: list[float]) -> float:
        return sum(values) / len(values)

    @method
    def stock(self, counts: dict[str, int], grid: list[list[int]] | None = None) -> int:
        return sum(counts.values())

    @method
    def anything(self, values: list[Any], loose: list) -> int:  # type: ignore[type-arg]
        return len(values)


def _refusal(spec_name: str, params: Any, agent: type[Agent] = Containers) -> Any:
    spec = agent.methods[spec_name]
    with pytest.raises(JsonRpcError) as error:
        if isinstance(params, list):
            spec.binder.caller(spec.attribute, params)  # the path of an array of params
        else:
            spec.bind(params)
    assert error.value.code == -32602
    return error.value.data


@pytest.mark.parametrize(
    ("name", "params", "detail"),
    [
        ("mean", [[1, 2.5, "3"]], "values[2]: expected {'type': 'number'}, got str"),
        ("mean", {"values": [1, None]}, "values[1]: expected {'type': 'number'}, got NoneType"),
        (
            "stock",
            {"counts": {"a": 1, "b": "2"}},
            "counts['b']: expected {'type': 'integer'}, got str",
        ),
        (
            "stock",
            [{"a": 1}, [[1], [2, True]]],
            "grid[1][1]: expected {'type': 'integer'}, got bool",
        ),
        (
            "stock",
            {"counts": {}, "grid": [[1], 2]},
            "grid[1]: expected {'type': 'array', 'items': {'type': 'integer'}}, got int",
        ),
    ],
)
def test_an_item_of_a_container_param_that_does_not_fit_is_invalid_params(
    name: str, params: Any, detail: str
) -> None:
    """Refused before the handler runs, naming the item: run, it would crash on the
    caller's input (and be retried and dead-lettered as a crash)."""
    assert _refusal(name, params) == detail


def test_container_params_whose_items_fit_or_are_not_typed_bind() -> None:
    assert Containers.methods["mean"].bind([[1, 2.5]]).args == ([1, 2.5],)
    assert Containers.methods["stock"].bind({"counts": {"a": 1}, "grid": None}).arguments == {
        "counts": {"a": 1},
        "grid": None,
    }
    assert Containers.methods["anything"].bind([[1, "x", None], ["y", {}]]).args == (
        [1, "x", None],
        ["y", {}],
    )
    assert _refusal("mean", {"values": "1, 2"}) == (
        "values: expected {'type': 'array', 'items': {'type': 'number'}}, got str"
    )


def test_a_stream_sent_as_one_array_has_its_items_checked() -> None:
    assert Shapes.methods["total"].bind({"values": [1, 2]}).arguments == {"values": [1, 2]}
    assert _refusal("total", {"values": [1, "2"]}, Shapes) == (
        "values[1]: expected {'type': 'integer'}, got str"
    )


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
            "properties": {
                "width": {"type": "number"},
                "height": {"type": "number", "default": 1.0},
            },
            "required": ["width"],
        },
        "result": {"type": "number"},
    }
    tag = next(m for m in card["methods"] if m["name"] == "tag")
    assert tag["params"]["properties"]["tags"] == {
        "type": ["array", "null"],
        "items": {"type": "string"},
        "default": None,
    }
    assert tag["params"]["properties"]["mode"] == {"enum": ["a", "b"], "default": "a"}
    numbers = next(m for m in card["methods"] if m["name"] == "numbers")
    assert (numbers["streaming"], numbers["result"]) == ("response", {"type": "integer"})
    total = next(m for m in card["methods"] if m["name"] == "total")
    assert (total["streaming"], total["streamParam"]) == ("request", "values")


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


class Documented(Agent):
    agent_id = "documented"

    @method
    def forecast(
        self,
        city: str,
        unit: Unit = Unit.C,
        ratio: Annotated[float, "share of sunny hours"] = 0.5,
    ) -> dict[str, Any]:
        """Weather forecast for a city.

        Longer explanation that is not part of the summary.

        Args:
            city: name of the city,
                possibly with the country
            unit: the temperature unit
        """
        return {"city": city}


def test_card_takes_descriptions_from_docstring_and_annotated() -> None:
    (entry,) = Documented.card()["methods"]
    assert entry["description"] == "Weather forecast for a city."
    assert entry["params"] == {
        "type": "object",
        "properties": {
            "city": {
                "type": "string",
                "description": "name of the city, possibly with the country",
            },
            "unit": {"enum": ["celsius", "fahrenheit"], "description": "the temperature unit"},
            "ratio": {"type": "number", "description": "share of sunny hours", "default": 0.5},
        },
        "required": ["city"],
    }
    assert Documented.methods["forecast"].bind(["Paris", "celsius", 0.7]).args[2] == 0.7
    with pytest.raises(JsonRpcError):
        Documented.methods["forecast"].bind(["Paris", "celsius", "sunny"])


def test_sphinx_docstrings_and_closed_function_schemas() -> None:
    def lookup(query: str, limit: int = 5, injected: object = None) -> list[str]:
        """Search the index.

        :param query: what to look for
        :param limit: at most this many hits
        """
        return []

    summary, params = function_schema(lookup, skip=lambda p, hint: p.name == "injected")
    assert summary == "Search the index."
    assert params == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "limit": {"type": "integer", "description": "at most this many hits", "default": 5},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert parse_docstring(inspect.getdoc(lookup))[1] == {
        "query": "what to look for",
        "limit": "at most this many hits",
    }
    assert parse_docstring(None) == ("", {})


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (int | None, {"type": ["integer", "null"]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (int | str | None, {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}),
        (Literal["a"] | None, {"enum": ["a", None]}),
        (bool, {"type": "boolean"}),
        (
            tuple[int, str],
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        ),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (set[str], {"type": "array", "items": {"type": "string"}}),
        (Any, {}),
        (Any | None, {}),
    ],
)
def test_schema_for_hints(hint: Any, schema: dict[str, Any]) -> None:
    assert schema_for(hint) == schema


def test_dataclass_schema() -> None:
    assert schema_for(Point) == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x"],
    }


def test_agent_id_must_be_a_valid_name() -> None:
    with pytest.raises(ValueError):
        type("Bad", (Agent,), {"agent_id": "no spaces"})


def test_an_async_handler_is_refused_where_it_is_declared() -> None:
    """Handlers run in the agent's actor thread: an ``async def`` one used to be
    accepted and then fail every call (-32603, "coroutine is not JSON")."""

    async def ask(self: Agent) -> str:
        return "x"

    async def stream(self: Agent) -> Any:
        yield 1

    for decorate in (method, method("ask"), subscribe("news.*")):
        for handler in (ask, stream):
            with pytest.raises(TypeError, match="is async: handlers run in the agent's actor"):
                decorate(handler)


def test_a_generator_subscriber_is_refused_where_it_is_declared() -> None:
    """Calling it would only make a generator: its body never ran, the event counted."""

    def on_news(self: Agent, event: Any) -> Any:
        yield event

    with pytest.raises(TypeError, match="is a generator: an event handler answers nothing"):
        subscribe("news.*")(on_news)


def test_hints_that_cannot_be_resolved_are_said_where_the_class_is_made() -> None:
    """Names imported under TYPE_CHECKING: every check of the method's params, and
    its stream parameter, would be gone without a word."""
    with pytest.warns(UnresolvedHints, match=r"Totals\.total cannot be resolved .*Missing"):

        class Totals(Agent):
            @method
            def total(self, values: Missing[int]) -> int:  # type: ignore[name-defined]  # noqa: F821
                return sum(values)

    assert Totals.agent_id == "totals"


def test_an_agent_without_a_docstring_has_no_description() -> None:
    class Plain(Agent):
        agent_id = "plain"

    class Said(Plain):
        """Says things."""

    assert Plain.description == ""  # not Agent's own docstring
    assert Said.description == "Says things."


def test_one_class_may_not_declare_a_method_name_twice_a_subclass_may_replace_it() -> None:
    def first(self: Agent) -> int:
        return 1

    def second(self: Agent) -> int:
        return 2

    with pytest.raises(TypeError, match=r"Twice.first and .second are both JSON-RPC method 'n'"):
        type("Twice", (Agent,), {"first": method("n")(first), "second": method("n")(second)})
    base = type("Base", (Agent,), {"first": method("n")(first)})
    replaced = type("Replaced", (base,), {"second": method("n")(second)})
    assert replaced.methods["n"].attribute == "second"


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


class Averager(Agent):
    agent_id = "averager"
    runs = 0

    @method
    def mean(self, values: list[float]) -> float:
        Averager.runs += 1
        return sum(values) / len(values)


@pytest.mark.timeout(300)  # a Kafka bus starts: the default guard
async def test_a_bad_item_is_answered_invalid_params_without_running_the_handler(
    make_bus: MakeBus,
) -> None:
    """Through a bus: the caller hears -32602 naming the item; the handler never ran,
    so nothing crashed, was retried or was dead-lettered."""
    bus = await make_bus(Averager)
    client = bus.async_client()
    Averager.runs = 0
    with pytest.raises(JsonRpcError) as error:
        await asyncio.wait_for(client.request("averager", "mean", [[1, "x"]]), WAIT)
    assert (error.value.code, error.value.data) == (
        -32602,
        "values[1]: expected {'type': 'number'}, got str",
    )
    assert Averager.runs == 0
    assert (bus.metrics.dead_letters, bus.metrics.redeliveries) == (0, 0)
    assert await asyncio.wait_for(client.request("averager", "mean", [[1, 2]]), WAIT) == 1.5
    assert Averager.runs == 1


class OddDefaults(Agent):
    agent_id = "odd-defaults"

    @method
    def pick(
        self,
        ratio: float = float("nan"),
        limit: float = float("inf"),
        big: int = 2**70,
        half: str = "\ud83d",
        fine: float = 0.5,
    ) -> float:
        return fine


def test_a_default_with_no_json_form_is_left_out_of_the_card() -> None:
    """The card is read by agent/card/get and published to the registry: a NaN,
    an infinity, an integer past 64 bits or a lone surrogate shown as a default would
    make every read and publish of it fail."""
    [pick] = OddDefaults.card()["methods"]
    properties = pick["params"]["properties"]
    assert [name for name in properties if "default" in properties[name]] == ["fine"]
    orjson.dumps(OddDefaults.card())  # the card travels
