"""What a card read from the registry must hold (a2a_bus.discovery.cards)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from a2a_bus.discovery.cards import MAX_DEPTH, card_problem
from tests.agents import Calc, Echo


def card(**fields: Any) -> dict[str, Any]:
    """A card as a host announces it, with ``fields`` replaced."""
    return {
        **Calc.card(),
        "node": "node-1",
        "replicas": 2,
        "heartbeatAt": time.time(),
        "status": "running",
        **fields,
    }


def nested(levels: int) -> dict[str, Any]:
    """An object nesting ``levels`` levels (itself the first)."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"x": value}
    return value


@pytest.mark.parametrize("agent", [Calc, Echo])
def test_the_cards_hosts_announce_are_taken(agent: Any) -> None:
    announced = {**agent.card(), "node": "n", "replicas": 1, "heartbeatAt": 1.5, "failure": "x"}
    assert card_problem(announced, agent.agent_id) is None


@pytest.mark.parametrize(
    ("bad", "key", "said"),
    [
        ([1, 2], "calc", "is a JSON array, not an object"),
        (card(methods="subtract"), "calc", "its methods 'subtract' are no list"),
        (card(methods=5), "calc", "its methods 5 are no list"),
        (card(methods=["subtract"]), "calc", "a method 'subtract' is no object"),
        (card(methods=[{"name": 7}]), "calc", "a method's name 7 is no non-empty string"),
        (card(methods=[{"name": ""}]), "calc", "a method's name '' is no non-empty string"),
        (card(methods=[{"name": "sub tract"}]), "calc", "'sub tract' holds a space or a control"),
        (card(methods=[{"name": "a\x00"}]), "calc", "holds a space or a control character"),
        (card(methods=[{"name": "rpc.x"}]), "calc", "begins with 'rpc.', which JSON-RPC reserves"),
        (card(methods=[{"name": "methods/list"}]), "calc", "the bus answers for every agent"),
        (card(methods=[{"name": "m", "streaming": 5}]), "calc", "its streaming 5 is no string"),
        (card(methods=[{"name": "m", "params": [1]}]), "calc", "its params [1] are no JSON"),
        (
            card(methods=[{"name": "m", "params": {"properties": []}}]),
            "calc",
            "its params {'properties': []} are no JSON",
        ),
        (card(id="a b"), "a b", "its id 'a b' is no agent id"),
        (card(id=None), "calc", "its id None is no agent id"),
        (card(id="a" * 300), "a" * 300, "its id has 300 characters"),
        (card(), "other", "is not its record's key: the record has the key 'other'"),
        (card(), None, "the record has no key that is text"),
        (card(heartbeatAt=True), "calc", "its heartbeatAt True is no finite number"),
        (card(heartbeatAt="soon"), "calc", "its heartbeatAt 'soon' is no finite number"),
        (card(heartbeatAt=float("nan")), "calc", "its heartbeatAt nan is no finite number"),
        (card(heartbeatAt=None), "calc", "its heartbeatAt None is no finite number"),
        (card(subscriptions=3), "calc", "its subscriptions 3 are no list of strings"),
        (card(subscriptions=[1]), "calc", "its subscriptions [1] are no list of strings"),
        (card(replicas=-1), "calc", "its replicas -1 are no whole number"),
        (card(replicas="lots"), "calc", "its replicas 'lots' are no whole number"),
        (card(description=5), "calc", "its description 5 is no string"),
        (card(node=["n"]), "calc", "its node ['n'] is no string"),
        # The card is the first level, the field's object the second.
        (card(extra=nested(MAX_DEPTH)), "calc", f"it nests deeper than {MAX_DEPTH} levels"),
    ],
)
def test_a_card_of_the_wrong_shape_says_what_is_wrong(bad: Any, key: str | None, said: str) -> None:
    problem = card_problem(bad, key)
    assert problem is not None and said in problem


def test_a_card_nesting_up_to_the_limit_is_taken() -> None:
    assert card_problem(card(extra=nested(MAX_DEPTH - 1)), "calc") is None
