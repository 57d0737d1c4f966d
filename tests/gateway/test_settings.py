"""GatewaySettings refuses values it cannot use, naming the variable they came from."""

from __future__ import annotations

import pytest

from a2a_bus.gateway import GatewaySettings


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
    ],
)
def test_a_bad_variable_is_named(name: str, value: str, expected: str) -> None:
    with pytest.raises(ValueError) as refused:
        GatewaySettings.from_env({name: value})
    assert str(refused.value) == f"{name}={value!r}: {expected}"
