"""W3C Trace Context on events: parsing, new traces, what an entering event keeps."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_bus.protocol import (
    Adaptor,
    adopt_trace,
    format_traceparent,
    new_traceparent,
    parse_traceparent,
    valid_tracestate,
)

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_valid_traceparent_is_parsed_into_its_parts() -> None:
    parsed = parse_traceparent(VALID)
    assert parsed is not None
    assert parsed.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert parsed.parent_id == "00f067aa0ba902b7"
    assert parsed.sampled


@pytest.mark.parametrize(
    "value",
    [
        None,
        42,
        "",
        "garbage",
        VALID.upper(),  # hex is lowercase
        VALID + "-extra",  # version 00 has exactly four fields
        "ff" + VALID[2:],  # version ff is invalid
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero parent id
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # short trace id
    ],
)
def test_a_malformed_traceparent_is_none(value: Any) -> None:
    assert parse_traceparent(value) is None


def test_a_later_version_may_append_fields() -> None:
    parsed = parse_traceparent("01" + VALID[2:] + "-more")
    assert parsed is not None and parsed.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_new_traceparents_are_valid_sampled_and_distinct() -> None:
    made = {new_traceparent() for _ in range(1000)}
    assert len(made) == 1000
    for value in made:
        parsed = parse_traceparent(value)
        assert parsed is not None and parsed.sampled


def test_format_traceparent_round_trips() -> None:
    value = format_traceparent(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0xF067AA0BA902B7, 1)
    assert value == VALID


def test_an_entering_event_keeps_its_own_valid_trace() -> None:
    attributes = {"traceparent": VALID, "tracestate": "a=1"}
    adopt_trace(attributes, new_traceparent(), "b=2")
    assert attributes == {"traceparent": VALID, "tracestate": "a=1"}


def test_an_entering_event_without_a_trace_takes_the_transports() -> None:
    attributes: dict[str, Any] = {}
    adopt_trace(attributes, VALID, "vendor=x")
    assert attributes == {"traceparent": VALID, "tracestate": "vendor=x"}


@pytest.mark.parametrize("tail", ["-more", "-a b", "-" + "a" * 20_000])
def test_a_later_version_goes_on_as_version_00_without_its_extra_fields(tail: str) -> None:
    """The specification's rule; carried as sent, 20,000 characters of fields would
    make the message too large and a space would pass into every header."""
    later = "01" + VALID[2:] + tail
    attributes: dict[str, Any] = {"traceparent": later}
    adopt_trace(attributes)
    assert attributes == {"traceparent": VALID}
    from_header: dict[str, Any] = {}
    adopt_trace(from_header, later, "a=1")
    assert from_header == {"traceparent": VALID, "tracestate": "a=1"}


@pytest.mark.parametrize(
    ("flags", "passed_on"), [("ff", "01"), ("fe", "00"), ("03", "01"), ("01", "01"), ("00", "00")]
)
def test_trace_flags_other_than_sampled_are_zeroed_when_passed_on(
    flags: str, passed_on: str
) -> None:
    """W3C Trace Context level 1: a vendor zeroes the flags it does not know."""
    given = VALID[:-2] + flags
    expected = VALID[:-2] + passed_on
    parsed = parse_traceparent(given)
    assert parsed is not None and parsed.flags == int(flags, 16)  # read as it came
    own: dict[str, Any] = {"traceparent": given}
    adopt_trace(own)
    assert own == {"traceparent": expected}
    from_header: dict[str, Any] = {}
    adopt_trace(from_header, given)
    assert from_header == {"traceparent": expected}
    later: dict[str, Any] = {"traceparent": "01" + given[2:] + "-more"}
    adopt_trace(later)
    assert later == {"traceparent": expected}
    assert format_traceparent(int(VALID[3:35], 16), int(VALID[36:52], 16), int(flags, 16)) == (
        expected
    )


def test_malformed_trace_context_is_dropped_not_refused() -> None:
    attributes: dict[str, Any] = {"traceparent": "nope", "tracestate": "a=1"}
    adopt_trace(attributes, "also-nope", "b=2")
    assert attributes == {}


def test_a_malformed_tracestate_is_not_passed_on() -> None:
    attributes: dict[str, Any] = {}
    adopt_trace(attributes, VALID, "x" * 600)
    assert attributes == {"traceparent": VALID}
    assert not valid_tracestate("a=\n1")


@pytest.mark.parametrize(
    "value",
    [
        "Vendor=A",  # keys are lower case
        "1vendor=a",  # a simple key starts with a letter
        "vendor",  # no value
        "vendor=",  # an empty value
        "vendor=a\x7fb",  # a value is printable ASCII
        "vendor=a=b",  # "=" has no place in a value
        "a=1,a=2",  # keys are unique
        "tenant@Sys=1",  # the system id too is lower case
        ",".join(f"k{n}=v" for n in range(33)),  # at most 32 members
        " , ",  # no member at all
    ],
)
def test_a_tracestate_outside_the_w3c_grammar_is_dropped(value: str) -> None:
    """An OpenTelemetry SDK would drop it too, with a warning for every message."""
    assert not valid_tracestate(value)


@pytest.mark.parametrize(
    "value",
    [
        "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
        "a=1 , \tb=2",
        "t1@sys-2=x y",
        "a=1,,b=2",
        "k/*_-=~!",
    ],
)
def test_a_tracestate_in_the_w3c_grammar_is_passed_on(value: str) -> None:
    assert valid_tracestate(value)


def test_a_response_event_continues_its_requests_trace() -> None:
    adaptor = Adaptor()
    [request] = adaptor.from_json({"jsonrpc": "2.0", "method": "m", "id": 1})
    assert not isinstance(request, type(None))
    request.get_attributes().update(traceparent=VALID, tracestate="a=1")  # type: ignore[union-attr]
    answer = adaptor.response_event(request, {"jsonrpc": "2.0", "result": 1, "id": 1})  # type: ignore[arg-type]
    assert answer.get_extension("traceparent") == VALID
    assert answer.get_extension("tracestate") == "a=1"


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        (VALID[:-2] + "ff", VALID[:-2] + "01"),
        (VALID[:-2] + "02", VALID[:-2] + "00"),
        ("01" + VALID[2:] + "-more", VALID),
        ("nope", None),
    ],
)
def test_a_response_event_passes_its_requests_trace_on_as_the_bus_sends_one(
    asked: str, answered: str | None
) -> None:
    """A request written straight to an agent's topic may carry any traceparent: its
    answer carries version 00 with only the sampled flag, or none when it is malformed."""
    adaptor = Adaptor()
    [request] = adaptor.from_json({"jsonrpc": "2.0", "method": "m", "id": 1})
    request.get_attributes().update(traceparent=asked, tracestate="a=1")  # type: ignore[union-attr]
    answer = adaptor.response_event(request, {"jsonrpc": "2.0", "result": 1, "id": 1})  # type: ignore[arg-type]
    assert answer.get_extension("traceparent") == answered
    assert answer.get_extension("tracestate") == ("a=1" if answered else None)
