"""JSON arguments of the CLI are parsed as the bus parses what it receives."""

from __future__ import annotations

import pytest
import typer

from a2a_bus.cli.common import parse_json


def test_json_arguments_parse() -> None:
    assert parse_json('{"minuend": 5, "subtrahend": [1, "2"]}', "PARAMS") == {
        "minuend": 5,
        "subtrahend": [1, "2"],
    }
    assert parse_json(str(2**64 - 1), "PARAMS") == 2**64 - 1


@pytest.mark.parametrize("text", [f"[{2**64}]", f'{{"a": {-(2**63) - 1}}}'])
def test_an_integer_the_bus_cannot_carry_is_refused(text: str) -> None:
    """orjson reads it as a float: sent on, it would arrive as another number."""
    with pytest.raises(typer.BadParameter) as caught:
        parse_json(text, "PARAMS")
    assert "refused" in caught.value.message and "send it as a string" in caught.value.message
    assert caught.value.param_hint == "PARAMS"


def test_text_that_is_not_json_is_refused() -> None:
    with pytest.raises(typer.BadParameter) as caught:
        parse_json("{not json", "PARAMS")
    assert caught.value.message.startswith("not JSON: ")
