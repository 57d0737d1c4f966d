"""Content modes of the Kafka and HTTP bindings, beyond what the vectors cover."""

from __future__ import annotations

from datetime import UTC, datetime

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


@pytest.mark.parametrize(("text", "seq"), [("7", 7), ("²", "²"), ("٣", "٣"), ("-1", "-1")])
def test_a_binary_seq_header_is_a_number_only_for_ascii_digits(text: str, seq: object) -> None:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "e-1",
        "ce-source": "tests",
        "ce-type": "com.example.t",
        "ce-seq": text,
    }
    [event] = from_http(headers, b"")
    assert event.get_extension("seq") == seq
