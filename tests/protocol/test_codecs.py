"""Content modes of the Kafka and HTTP bindings, beyond what the vectors cover."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import orjson
import pytest

from a2a_bus.protocol import (
    CloudEvent,
    ProtocolError,
    events_equal,
    from_http,
    from_kafka,
    new_event,
    record_key,
    to_http,
    to_kafka,
    to_structured,
)


def _event(**extra: object) -> CloudEvent:
    attributes = {"id": "e-1", "source": "tests", "type": "com.example.t", **extra}
    return new_event(attributes, {"k": [1, 2]})


def test_partitionkey_becomes_the_record_key_and_survives() -> None:
    event = _event(partitionkey="p-7", sessionid="s-1")
    record = to_kafka(event)
    assert record.key == b"p-7"
    assert events_equal(from_kafka(record.value, record.headers, record.key), event)


def test_key_falls_back_to_session_then_collaboration() -> None:
    assert record_key(_event(sessionid="s-1", collaborationid="c-1")) == b"s-1"
    assert record_key(_event(collaborationid="c-1")) == b"c-1"
    assert record_key(_event()) is None


def test_foreign_key_becomes_partitionkey() -> None:
    record = to_kafka(_event())
    decoded = from_kafka(record.value, record.headers, b"customer-42")
    assert decoded.get_extension("partitionkey") == "customer-42"


def test_structured_kafka_record_with_ce_headers_stays_structured() -> None:
    event = _event(targetagent="calc")
    record = to_kafka(event, "structured")
    stray = [*record.headers, ("ce_specversion", b"1.0"), ("ce_id", b"other")]
    decoded = from_kafka(record.value, stray, record.key)
    assert decoded.get_id() == "e-1"
    assert events_equal(decoded, event)


def test_time_and_binary_data_round_trip_in_every_mode() -> None:
    when = datetime(2026, 11, 29, 12, 30, tzinfo=UTC)
    event = new_event(
        {"id": "b", "source": "s", "type": "t", "time": when, "datacontenttype": "image/png"},
        b"\x89PNG\x00\xff",
    )
    for mode in ("binary", "structured"):
        record = to_kafka(event, mode)
        assert events_equal(from_kafka(record.value, record.headers, record.key), event)
        headers, body = to_http(event, mode)
        assert events_equal(from_http(headers, body)[0], event)
    assert to_structured(event)["data_base64"] == "iVBORwD/"
    assert to_structured(event)["time"] == "2026-11-29T12:30:00Z"


def test_http_binary_percent_encodes_header_values() -> None:
    event = _event(subject='a "quoted" subject ünïcode ✓ %')
    headers, body = to_http(event)
    assert all(value.isascii() and " " not in value for value in headers.values())
    assert from_http(headers, body)[0].get_subject() == 'a "quoted" subject ünïcode ✓ %'


def test_kafka_record_that_is_not_a_cloudevent_is_rejected_with_a_reason() -> None:
    with pytest.raises(ProtocolError) as info:
        from_kafka(b"plain bytes", [("content-type", b"text/plain")])
    assert "ce_specversion" in info.value.failure.reason


def test_unsupported_event_format_is_rejected() -> None:
    with pytest.raises(ProtocolError):
        from_http({"Content-Type": "application/cloudevents+avro"}, b"\x00")


def test_header_names_are_case_insensitive() -> None:
    event = _event()
    headers, body = to_http(event)
    shouted = {name.upper(): value for name, value in headers.items()}
    assert events_equal(from_http(shouted, body)[0], event)


def _binary(**headers: str) -> dict[str, str]:
    """Binary-mode HTTP headers of a minimal event, plus ``headers`` (``_`` as ``-``)."""
    extra = {name.replace("_", "-"): value for name, value in headers.items()}
    return {
        "ce-specversion": "1.0",
        "ce-id": "e-1",
        "ce-source": "tests",
        "ce-type": "com.example.t",
        **extra,
    }


@pytest.mark.parametrize(("text", "seq"), [("7", 7), ("²", "²"), ("٣", "٣"), ("-1", "-1")])
def test_a_binary_seq_header_is_a_number_only_for_ascii_digits(text: str, seq: object) -> None:
    [event] = from_http(_binary(ce_seq=quote(text)), b"")
    assert event.get_extension("seq") == seq


@pytest.mark.parametrize(
    ("sent", "subject"),
    [
        ("Euro%20%E2%82%AC%20%F0%9F%98%80", "Euro € 😀"),  # the binding's own example
        ("%e2%82%ac", "€"),  # lowercase hex
        ("%41bc", "Abc"),  # an escape that was not needed
        ("100%2541", "100%41"),  # one round of decoding, not two
        ("a b", "a b"),  # older senders leave spaces as they are
        ('"hello world"', "hello world"),  # and may quote the value (RFC 7230)
        ('"say \\"hi\\" %21"', 'say "hi" !'),  # unquoted first, then percent-decoded
    ],
)
def test_http_header_values_decode_as_the_binding_says(sent: str, subject: str) -> None:
    [event] = from_http(_binary(ce_subject=sent), b"")
    assert event.get_subject() == subject


@pytest.mark.parametrize(
    ("sent", "reason"),
    [
        ("a%ZZb", "starts no %XY escape"),
        ("a%4", "starts no %XY escape"),
        ("a%", "starts no %XY escape"),
        ("a%E9b", "not UTF-8"),  # Latin-1, not UTF-8
        ("%C0%A0", "not UTF-8"),  # an overlong space: the binding's example of a refusal
        ("%ED%A0%80", "not UTF-8"),  # a surrogate
        ("a\xe9b", "not printable ASCII"),  # a raw byte (Latin-1 as the server reads it)
        ("a\tb", "not printable ASCII"),
    ],
)
def test_an_http_header_value_the_binding_forbids_is_refused_naming_the_header(
    sent: str, reason: str
) -> None:
    with pytest.raises(ProtocolError) as info:
        from_http(_binary(ce_subject=sent), b"")
    detail = str(info.value.failure.data)
    assert detail.startswith("header 'ce-subject' ")
    assert reason in detail


# -- time: RFC 3339, not the rest of ISO 8601 ------------------------------------------


def _structured(**attributes: Any) -> tuple[dict[str, str], bytes]:
    event = {"specversion": "1.0", "id": "e-1", "source": "tests", "type": "t", **attributes}
    return {"content-type": "application/cloudevents+json"}, orjson.dumps(event)


def _every_http_mode(**attributes: str) -> list[tuple[dict[str, str], bytes]]:
    """One event with ``attributes`` (strings) in binary, structured and batched mode."""
    structured = _structured(**attributes)[1]
    binary = _binary(**{f"ce_{name}": quote(value) for name, value in attributes.items()})
    batch = ({"content-type": "application/cloudevents-batch+json"}, b"[%s]" % structured)
    return [(binary, b""), _structured(**attributes), batch]


@pytest.mark.parametrize(
    ("sent", "when"),
    [
        ("2026-12-05T10:20:30Z", datetime(2026, 12, 5, 10, 20, 30, tzinfo=UTC)),
        ("2026-12-05t10:20:30z", datetime(2026, 12, 5, 10, 20, 30, tzinfo=UTC)),
        (
            "2026-12-05T10:20:30.5+01:30",
            datetime(2026, 12, 5, 10, 20, 30, 500000, timezone(timedelta(hours=1, minutes=30))),
        ),
        ("2026-12-05T10:20:30.123456789-00:00", datetime(2026, 12, 5, 10, 20, 30, 123456, UTC)),
    ],
)
def test_time_in_rfc_3339_is_read_in_every_http_mode(sent: str, when: datetime) -> None:
    for headers, body in _every_http_mode(time=sent):
        [event] = from_http(headers, body)
        assert event.get_time() == when


@pytest.mark.parametrize(
    "sent",
    [
        "2026-12-05",  # a date alone
        "20261205T102030Z",  # ISO 8601's basic format
        "2026-12-05T10:20:30",  # no offset
        "2026-12-05 10:20:30Z",  # no T
        "2026-12-05T10:20Z",  # no seconds
        "2026-12-05T10:20:30+0100",
        "2026-12-05T10:20:30+01",
        "2026-12-05T10:20:30+01:00:30",
        "2026-W49-6T10:20:30Z",
        "2026-12-05T10:20:30,5Z",
        "\uff12\uff10\uff12\uff16-12-05T10:20:30Z",  # fullwidth digits
        "2026-13-05T10:20:30Z",  # the right form, but no such month
    ],
)
def test_time_that_is_not_rfc_3339_is_refused_in_every_http_mode(sent: str) -> None:
    for headers, body in _every_http_mode(time=sent):
        with pytest.raises(ProtocolError) as info:
            from_http(headers, body)
        assert "attribute 'time' is not" in str(info.value.failure.data)


# -- strings: no control characters ----------------------------------------------------


@pytest.mark.parametrize("control", ["\n", "\x00", "\x1f", "\x7f", "\x85", "\x9f"])
@pytest.mark.parametrize("name", ["subject", "source", "region"])
def test_a_control_character_in_a_string_attribute_is_refused_in_every_http_mode(
    control: str, name: str
) -> None:
    for headers, body in _every_http_mode(**{name: f"a{control}b"}):
        with pytest.raises(ProtocolError) as info:
            from_http(headers, body)
        assert f"attribute {name!r} holds the control character {control!r}" in str(
            info.value.failure.data
        )


@pytest.mark.parametrize("text", ["a\xa0b", "a\u2028b", "tab-free ünïcode ✓"])
def test_characters_beside_the_control_ranges_pass_in_every_http_mode(text: str) -> None:
    for headers, body in _every_http_mode(subject=text):
        [event] = from_http(headers, body)
        assert event.get_subject() == text
