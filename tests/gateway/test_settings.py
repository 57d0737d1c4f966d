"""GatewaySettings refuses values it cannot use, naming the variable they came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_bus.gateway import GatewaySettings
from a2a_bus.runtime.env import EnvError


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan"), float("inf")])
def test_a_request_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(ValueError, match="request_timeout must be a positive number of seconds"):
        GatewaySettings(request_timeout=timeout)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("A2A_GATEWAY_REQUEST_TIMEOUT", "-1", "expected a positive number of seconds"),
        ("A2A_GATEWAY_MAX_BATCH", "0", "expected a whole number, at least 1"),
        ("A2A_GATEWAY_MAX_BODY_BYTES", "1e6", "expected a whole number, at least 1"),
        ("A2A_GATEWAY_TOKENS_FILE", "/no/such/file", "No such file or directory"),
        (
            "A2A_GATEWAY_A2A_ROOT",
            "bad root",
            "invalid agent id 'bad root': must match ^[A-Za-z0-9._-]+$",
        ),
        (
            "A2A_GATEWAY_A2A_TASK_STORE",
            "bogus",
            "expected 'memory', 'kafka' or 'sqlite:///path/to/file.db'",
        ),
    ],
)
def test_a_bad_variable_is_named(name: str, value: str, expected: str) -> None:
    with pytest.raises(ValueError) as refused:
        GatewaySettings.from_env({name: value})
    assert str(refused.value) == f"{name}={value!r}: {expected}"


def test_a_tokens_file_with_a_mistake_is_named_with_its_variable(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("- a\n")
    with pytest.raises(EnvError, match=r"^A2A_GATEWAY_TOKENS_FILE='.*tokens\.yaml': .*mapping"):
        GatewaySettings.from_env({"A2A_GATEWAY_TOKENS_FILE": str(tokens)})
