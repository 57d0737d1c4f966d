"""Decoding records: CloudEvents in either content mode, raw JSON-RPC, undecodable records."""

from __future__ import annotations

import orjson
import pytest

from a2a_bus.protocol import Adaptor, new_event, to_kafka
from a2a_bus.transport.records import decode_record, failure_reason


def test_binary_cloudevent_record() -> None:
    event = new_event({"type": "x", "source": "src", "id": "e1"}, {"a": 1})
    record = to_kafka(event)
    out = decode_record(Adaptor(), "t", 0, 3, record.value, record.headers, record.key)
    assert not out.failures
    [decoded] = out.events
    assert decoded.event.get_id() == "e1"
    assert decoded.dedup_key == ("src", "e1")
    assert not decoded.raw


def test_structured_cloudevent_record() -> None:
    event = new_event({"type": "x", "source": "src", "id": "e2"}, {"a": 1})
    record = to_kafka(event, "structured")
    out = decode_record(Adaptor(), "t", 0, 3, record.value, record.headers, record.key)
    assert [d.event.get_id() for d in out.events] == ["e2"]


def test_raw_request_is_keyed_by_position_not_by_its_id() -> None:
    message = {"jsonrpc": "2.0", "method": "m", "id": 1}
    out = decode_record(Adaptor(), "t", 2, 5, orjson.dumps(message), [], None)
    [decoded] = out.events
    assert decoded.raw
    assert decoded.event.get_id() == "1"
    assert decoded.dedup_key == ("raw", "t/2/5")


def test_raw_notification_takes_an_id_from_its_position() -> None:
    batch = [{"jsonrpc": "2.0", "method": "n"}, {"jsonrpc": "2.0", "method": "n"}]
    out = decode_record(Adaptor(), "t", 2, 5, orjson.dumps(batch), [], None)
    assert [d.event.get_id() for d in out.events] == ["t/2/5/0", "t/2/5/1"]
    again = decode_record(Adaptor(), "t", 2, 5, orjson.dumps(batch), [], None)
    assert [d.event.get_id() for d in again.events] == ["t/2/5/0", "t/2/5/1"]


@pytest.mark.parametrize(
    ("value", "code"),
    [(b"\x00garbage", -32700), (b'{"hello": 1}', -32600), (b"[]", -32600), (None, -32600)],
)
def test_undecodable_records_fail_with_a_reason(value: bytes | None, code: int) -> None:
    out = decode_record(Adaptor(), "t", 0, 0, value, [], None)
    assert not out.events
    assert out.failures[0].code == code
    assert failure_reason(out.failures).startswith("undecodable: ")


def test_broken_binary_cloudevent_fails() -> None:
    out = decode_record(Adaptor(), "t", 0, 0, b"{}", [("ce_specversion", b"1.0")], None)
    assert not out.events and out.failures
