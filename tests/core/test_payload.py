"""The payload bound itself (a2a_bus.core.payload), shortcuts included."""

from __future__ import annotations

import orjson
import pytest

from a2a_bus.core.payload import MAX_PAYLOAD_BYTES, PayloadError, check_payload, refusal
from a2a_bus.protocol import ErrorCode


@pytest.mark.parametrize("value", [None, True, 0, (1 << 64) - 1, -(1 << 63), "", "short"])
def test_small_scalars_pass(value: object) -> None:
    check_payload(value, "x")


@pytest.mark.parametrize("value", [1 << 64, -(1 << 63) - 1])
def test_integers_orjson_cannot_write_are_not_json(value: int) -> None:
    with pytest.raises(PayloadError) as error:
        check_payload(value, "the result")
    assert not error.value.too_large
    assert error.value.detail.startswith("the result is not JSON: ")


def test_the_string_shortcut_never_lets_a_string_over_the_bound_through() -> None:
    # The worst case: every character escaped as \\uXXXX.
    worst = "\x01" * (MAX_PAYLOAD_BYTES // 6)
    assert len(orjson.dumps(worst)) <= MAX_PAYLOAD_BYTES
    check_payload(worst, "x")
    with pytest.raises(PayloadError) as error:
        check_payload("\x01" * (MAX_PAYLOAD_BYTES // 6 + 1), "x")
    assert error.value.too_large


def test_the_bound_is_on_the_json_form() -> None:
    check_payload("x" * (MAX_PAYLOAD_BYTES - 2), "x")  # with its quotes: the bound exactly
    with pytest.raises(PayloadError) as error:
        check_payload("x" * (MAX_PAYLOAD_BYTES - 1), "text")
    assert error.value.detail == (
        f"text is {MAX_PAYLOAD_BYTES + 1} bytes, more than the {MAX_PAYLOAD_BYTES} "
        "one message may carry"
    )


def test_bytes_count_as_base64_and_only_where_bytes_may_go() -> None:
    check_payload(b"\x00" * (MAX_PAYLOAD_BYTES // 4 * 3), "data", binary=True)
    with pytest.raises(PayloadError) as error:
        check_payload(b"\x00" * (MAX_PAYLOAD_BYTES // 4 * 3 + 1), "data", binary=True)
    assert "as base64" in error.value.detail
    with pytest.raises(PayloadError):
        check_payload(b"\x00", "params")  # bytes are no JSON


def test_refusal_words_the_error_for_each_side() -> None:
    over = "x" * MAX_PAYLOAD_BYTES
    sender, result = refusal(over, "params"), refusal(over, "the result", result=True)
    assert sender is not None and (sender.code, sender.message) == (
        ErrorCode.TOO_LARGE,
        "Request too large",
    )
    assert result is not None and result.message == "Response too large"
    odd = refusal({1, 2}, "the result", result=True)
    assert odd is not None and odd.code == ErrorCode.INTERNAL_ERROR
    bad = refusal(float("nan"), "params")
    assert bad is not None and bad.code == ErrorCode.INVALID_PARAMS
    assert refusal([1, "a", None], "params") is None


def test_a_short_string_orjson_cannot_write_is_not_json() -> None:
    with pytest.raises(PayloadError) as error:
        check_payload("a lone surrogate: \ud800", "the result")
    assert "surrogates not allowed" in error.value.detail
