"""``event_kind``: what an event is, from ``mcptype`` or else its type (PROTOCOL.md section 3)."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_bus.protocol import Adaptor, Kind, event_kind, new_event

PREFIX = "org.apache.eventmesh.a2a"


def _event(type_: str, **extensions: Any) -> Any:
    attributes = {"specversion": "1.0", "id": "e-1", "source": "/test", "type": type_}
    return new_event({**attributes, **extensions}, {"x": 1})


@pytest.mark.parametrize(
    ("type_", "kind"),
    [
        (f"{PREFIX}.tools.call.req", Kind.REQUEST),
        (f"{PREFIX}.message.sendStream.stream", Kind.REQUEST),
        (f"{PREFIX}.common.response", Kind.RESPONSE),
        (f"{PREFIX}.notifications.alert", Kind.NOTIFICATION),
        ("com.example.order.created", Kind.NOTIFICATION),
        ("com.example.order.req", Kind.REQUEST),  # the suffix decides, under any prefix
        ("com.example.common.response", Kind.RESPONSE),
        (f"{PREFIX}.request", Kind.NOTIFICATION),  # a suffix is a whole segment
    ],
)
def test_without_mcptype_the_type_decides(type_: str, kind: Kind) -> None:
    assert event_kind(_event(type_)) is kind


@pytest.mark.parametrize("value", ["request", "notification", "response"])
def test_mcptype_decides_over_the_type(value: str) -> None:
    for type_ in (f"{PREFIX}.add.req", f"{PREFIX}.common.response", f"{PREFIX}.note"):
        assert event_kind(_event(type_, mcptype=value)) is Kind(value)


def test_an_unknown_mcptype_counts_as_absent() -> None:
    assert event_kind(_event(f"{PREFIX}.add.req", mcptype="query")) is Kind.REQUEST
    assert event_kind(_event(f"{PREFIX}.add", mcptype="query")) is Kind.NOTIFICATION


def test_every_converted_message_keeps_its_kind() -> None:
    adaptor = Adaptor()
    messages = [
        ({"jsonrpc": "2.0", "method": "add", "params": [1], "id": 7}, Kind.REQUEST),
        ({"jsonrpc": "2.0", "method": "message/sendStream", "id": "s"}, Kind.REQUEST),
        ({"jsonrpc": "2.0", "method": "add", "params": [1]}, Kind.NOTIFICATION),
        ({"jsonrpc": "2.0", "result": 3, "id": 7}, Kind.RESPONSE),
    ]
    for message, kind in messages:
        [event] = adaptor.from_json(message)
        assert event_kind(event) is kind
        # the same answer without mcptype: the type alone carries the kind
        del event.get_attributes()["mcptype"]
        assert event_kind(event) is kind


def test_to_jsonrpc_follows_the_kind_of_a_native_event() -> None:
    adaptor = Adaptor()
    request = adaptor.to_jsonrpc(_event(f"{PREFIX}.add.req"))
    assert request == {"jsonrpc": "2.0", "method": "add", "params": {"x": 1}, "id": "e-1"}
    notification = adaptor.to_jsonrpc(_event(f"{PREFIX}.add"))
    assert notification == {"jsonrpc": "2.0", "method": "add", "params": {"x": 1}}
    response = adaptor.to_jsonrpc(_event(f"{PREFIX}.common.response", collaborationid="9"))
    assert response == {"jsonrpc": "2.0", "result": {"x": 1}, "id": "9"}
