"""Golden vectors: protocol/vectors/*.json, input -> expected events or errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from a2a_bus.protocol import Adaptor, Failure, to_structured

VECTORS = Path(__file__).resolve().parents[2] / "protocol" / "vectors"


def _cases() -> list[Any]:
    out = []
    for path in sorted(VECTORS.glob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            out.append(pytest.param(case, id=f"{path.stem}: {case['name']}"))
    return out


def _body(spec: dict[str, Any]) -> bytes:
    if "body_text" in spec:
        return spec["body_text"].encode()
    if "body_hex" in spec:
        return bytes.fromhex(spec["body_hex"])
    if "nested_depth" in spec:
        depth = spec["nested_depth"]
        return b'{"jsonrpc":"2.0","method":"x","params":' + b"[" * depth + b"]" * depth + b"}"
    return orjson.dumps(spec["body"])


def test_vector_files_exist() -> None:
    assert len(_cases()) >= 40


@pytest.mark.parametrize("case", _cases())
def test_vector(case: dict[str, Any]) -> None:
    adaptor = Adaptor(**case.get("adaptor", {}))
    spec = case["input"]
    results = adaptor.from_bytes(_body(spec), spec.get("content_type"), spec.get("headers"))
    assert len(results) == len(case["expect"])
    for got, want in zip(results, case["expect"], strict=True):
        if "error" in want:
            assert isinstance(got, Failure), f"expected an error, got {got!r}"
            response = got.response()
            assert response["error"]["code"] == want["error"]["code"]
            assert response["id"] == want["error"]["id"]
            assert isinstance(response["error"]["message"], str) and response["error"]["message"]
            continue
        assert not isinstance(got, Failure), f"expected an event, got {got!r}"
        actual = to_structured(got)
        expected = dict(want["event"])
        if "id" not in expected:  # generated: any non-empty string, unique per event
            assert isinstance(actual.pop("id"), str)
        assert actual == expected
    if case.get("roundtrip"):
        messages = [adaptor.to_jsonrpc(event) for event in results]  # type: ignore[arg-type]
        original = spec["body"]
        assert messages == (original if isinstance(original, list) else [original])


def test_events_of_one_method_each_have_attributes_of_their_own() -> None:
    adaptor = Adaptor()
    first, second = (
        adaptor.from_json({"jsonrpc": "2.0", "method": "add", "params": [n], "id": n})[0]
        for n in (1, 2)
    )
    assert not isinstance(first, Failure) and not isinstance(second, Failure)
    first.get_attributes()["targetagent"] = "calc"
    third = adaptor.from_json({"jsonrpc": "2.0", "method": "add", "params": [3], "id": 3})[0]
    assert not isinstance(third, Failure)
    assert [e.get_id() for e in (first, second, third)] == ["1", "2", "3"]
    assert "targetagent" not in second.get_attributes()
    assert "targetagent" not in third.get_attributes()
    assert list(third.get_attributes())[:2] == ["specversion", "id"]
