"""``parse_json``: inbound JSON, with integers outside -2**63 .. 2**64-1 refused (-32600,
id null) rather than read as floats, by every decoder that parses bytes."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_bus.protocol import (
    Adaptor,
    ErrorCode,
    Failure,
    ProtocolError,
    from_http,
    from_kafka,
    parse_json,
)
from a2a_bus.protocol.parsing import INT_MAX, INT_MIN, out_of_range_integer, whole_number

HUGE = 2**64


def _refusal(body: bytes) -> Failure:
    with pytest.raises(ProtocolError) as caught:
        parse_json(body)
    return caught.value.failure


@pytest.mark.parametrize(
    "literal",
    [HUGE, -(2**63) - 1, 10**20, -(10**19), 10**300, -(10**300), 99999999999999999999],
)
def test_an_integer_outside_the_range_is_refused(literal: int) -> None:
    failure = _refusal(b'{"jsonrpc": "2.0", "method": "m", "params": [%d], "id": 1}' % literal)
    assert (failure.code, failure.message, failure.id) == (
        ErrorCode.INVALID_REQUEST,
        "Invalid Request",
        None,
    )
    assert f"integer {str(literal)[:20]}" in failure.data
    assert "outside the 64-bit range" in failure.data


def test_a_very_long_literal_is_named_shortened() -> None:
    failure = _refusal(b"[1" + b"0" * 300 + b"]")
    assert "(301 digits)" in failure.data
    assert len(failure.data) < 200


def test_an_integer_beyond_a_double_is_a_parse_error() -> None:
    # orjson refuses it itself (as it refuses 1e400): no number it could stand for
    failure = _refusal(b"[1" + b"0" * 5000 + b"]")
    assert (failure.code, failure.id) == (ErrorCode.PARSE_ERROR, None)
    assert "infinity" in failure.data
    assert out_of_range_integer(b"[1" + b"0" * 5000 + b"]") == "1" + "0" * 5000


@pytest.mark.parametrize("literal", [INT_MAX, INT_MIN, 2**63, -1, 0, 10**19, -(10**18)])
def test_an_integer_in_range_is_read_exactly(literal: int) -> None:
    value = parse_json(b'{"n": %d}' % literal)
    assert value == {"n": literal}
    assert type(value["n"]) is int


@pytest.mark.parametrize(
    "body",
    [
        b'{"id": "18446744073709551616"}',  # digits in a string
        b'{"18446744073709551616": 1}',  # in a key
        b'["\\"18446744073709551616\\"", "a\\\\"]',  # escaped quotes and backslashes
        b"[1.00000000000000000000000001]",  # a fraction
        b"[18446744073709551616.5, 1e-12345678901234567890]",  # a float, an exponent
        b"[184467440737095516160e0]",  # an integer part with an exponent is a float
        b'{"rule": "--------------------------------"}',  # a run of minus signs
        b'{"date": "2026-11-30-12-00-00-000000000"}',
    ],
)
def test_long_digit_runs_that_are_no_integer_pass(body: bytes) -> None:
    assert parse_json(body) == orjson.loads(body)


def test_bytes_that_are_not_json_are_a_parse_error() -> None:
    failure = _refusal(b'{"id": 1')
    assert (failure.code, failure.id) == (ErrorCode.PARSE_ERROR, None)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    )
)
def test_refused_exactly_when_an_integer_is_out_of_range(value: Any) -> None:
    body = json.dumps(value).encode()  # the stdlib writes any integer

    def integers(item: Any) -> list[int]:
        if type(item) is int:
            return [item]
        if isinstance(item, list):
            return [n for element in item for n in integers(element)]
        if isinstance(item, dict):
            return [n for element in item.values() for n in integers(element)]
        return []

    outside = [n for n in integers(value) if not INT_MIN <= n <= INT_MAX]
    assert (out_of_range_integer(body) is not None) == bool(outside)
    if outside:
        assert _refusal(body).code == ErrorCode.INVALID_REQUEST
    else:
        assert parse_json(body) == value


EVENT = b'{"specversion": "1.0", "id": "e", "source": "/s", "type": "t", "data": {"n": %d}}' % HUGE


def test_every_decoder_of_bytes_refuses_it() -> None:
    adaptor = Adaptor()
    jsonrpc = b'{"jsonrpc": "2.0", "method": "m", "id": %d}' % HUGE
    for body, content_type, headers in [
        (jsonrpc, None, None),
        (b"[%s]" % jsonrpc, None, None),
        (EVENT, "application/cloudevents+json", None),
        (b"[%s]" % EVENT, "application/cloudevents-batch+json", None),
        (
            b"[%d]" % HUGE,
            None,
            [
                ("ce_specversion", b"1.0"),
                ("ce_id", b"e"),
                ("ce_source", b"/s"),
                ("ce_type", b"t"),
                ("content-type", b"application/json"),
            ],
        ),
    ]:
        [item] = adaptor.from_bytes(body, content_type, headers)
        assert isinstance(item, Failure), body
        assert (item.code, item.id) == (ErrorCode.INVALID_REQUEST, None), item
        assert "outside the 64-bit range" in item.data
    structured = [("content-type", b"application/cloudevents+json")]
    binary = [("ce_specversion", b"1.0"), ("ce_id", b"e"), ("ce_source", b"/s"), ("ce_type", b"t")]
    for value, headers in [(EVENT, structured), (b"[%d]" % HUGE, binary)]:
        with pytest.raises(ProtocolError, match="outside the 64-bit range"):
            from_kafka(value, headers)
    with pytest.raises(ProtocolError, match="outside the 64-bit range"):
        from_http({"content-type": "application/cloudevents+json"}, EVENT)
    with pytest.raises(ProtocolError, match="outside the 64-bit range"):
        from_http({"content-type": "application/cloudevents-batch+json"}, b"[%s]" % EVENT)


@pytest.mark.parametrize(
    ("text", "number"), [("0", 0), ("42", 42), (" 7 ", 7), ("9" * 18, 10**18 - 1)]
)
def test_a_whole_number_in_ascii_digits_is_read(text: str, number: int) -> None:
    assert whole_number(text) == number


@pytest.mark.parametrize(
    "text",
    [None, "", " ", "-1", "+1", "1.0", "1_000", "\u00b2", "\u0663", "1e3", "9" * 19, "9" * 5000],
)
def test_what_int_would_take_or_choke_on_is_no_whole_number(text: str | None) -> None:
    """'²' and Arabic-Indic digits pass ``str.isdigit``; int() refuses the first and
    reads the second; thousands of digits it refuses (or reads slowly)."""
    assert whole_number(text) is None


def test_a_whole_number_may_be_given_fewer_digits() -> None:
    assert whole_number("1000", max_digits=4) == 1000
    assert whole_number("10000", max_digits=4) is None
