"""The JSON Schemas in protocol/schemas agree with the adaptor on the golden vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from a2a_bus.protocol import Adaptor, Failure, to_structured

ROOT = Path(__file__).resolve().parents[2] / "protocol"


def _schema(name: str) -> Draft202012Validator:
    schema = json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _vector_bodies() -> list[Any]:
    bodies = []
    for path in sorted((ROOT / "vectors").glob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            if "body" in case["input"] and not case["input"].get("headers"):
                bodies.append(pytest.param(case["input"]["body"], id=case["name"]))
    return bodies


def _elements(body: Any) -> list[Any]:
    return body if isinstance(body, list) else [body]


#: Calls with a routing member beside ``params``, which the adaptor refuses.
MISPLACED_ROUTING = [
    pytest.param({"jsonrpc": "2.0", "method": "add", member: value, "id": 1}, id=member)
    for member, value in (("_agentId", "calc"), ("_topic", "t"), ("_seq", 0), ("_sessionId", "s"))
]


@pytest.mark.parametrize("body", _vector_bodies() + MISPLACED_ROUTING)
def test_schemas_accept_exactly_what_the_adaptor_converts(body: Any) -> None:
    request, response, event = (
        _schema("jsonrpc-request"),
        _schema("jsonrpc-response"),
        _schema("cloudevent"),
    )
    adaptor = Adaptor(max_message_bytes=1 << 30, max_batch=10_000)
    results = adaptor.from_json(body)
    if len(results) != len(_elements(body)):
        return  # whole-batch failures (empty batch) are not element-wise
    for element, result in zip(_elements(body), results, strict=True):
        valid = (
            request.is_valid(element)
            or response.is_valid(element)
            or (isinstance(element, dict) and "jsonrpc" not in element and event.is_valid(element))
        )
        assert valid == (not isinstance(result, Failure)), element
        if not isinstance(result, Failure):
            assert event.is_valid(to_structured(result))
