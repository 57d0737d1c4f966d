"""The method a CloudEvent calls (PROTOCOL.md section 3): ``a2amethod``, else the type
without the prefix and suffix."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_bus.protocol import Adaptor, CloudEvent, ext

adaptor = Adaptor()
PREFIX = "org.apache.eventmesh.a2a"


def event(type_: str, **extensions: Any) -> CloudEvent:
    return CloudEvent({"id": "e-1", "source": "/t", "type": type_, **extensions}, {"a": 1})


@pytest.mark.parametrize(
    ("type_", "extensions", "method"),
    [
        (f"{PREFIX}.add.req", {"mcptype": "request"}, "add"),
        (f"{PREFIX}.tools.call.req", {}, "tools/call"),
        (f"{PREFIX}.message.sendStream.stream", {}, "message/sendStream"),
        (f"{PREFIX}.notifications.alert", {"mcptype": "notification"}, "notifications/alert"),
        (f"{PREFIX}.add.req", {"a2amethod": "sum"}, "sum"),
        ("com.example.news", {"a2amethod": "sum"}, "sum"),
        ("com.example.news", {}, None),
        (f"{PREFIX}.common.response", {}, None),
        (f"{PREFIX}.add.req", {"mcptype": "response"}, None),
        (f"{PREFIX}.orders.eu", {"subject": "orders.eu"}, None),  # published, not a call
        (f"{PREFIX}.orders.eu", {"subject": "orders.eu", "a2amethod": "sum"}, "sum"),
    ],
)
def test_method_of(type_: str, extensions: dict[str, Any], method: str | None) -> None:
    assert adaptor.method_of(event(type_, **extensions)) == method


def test_the_derived_method_agrees_with_the_rebuilt_json_rpc_message() -> None:
    derived = event(f"{PREFIX}.tools.call.req", mcptype="request")
    assert adaptor.to_jsonrpc(derived)["method"] == adaptor.method_of(derived)


def test_with_method_sets_a2amethod_on_a_copy_only_when_missing() -> None:
    original = event(f"{PREFIX}.add.req", mcptype="request")
    routable = adaptor.with_method(original)
    assert routable.get_extension(ext.METHOD) == "add"
    assert original.get_extension(ext.METHOD) is None
    assert routable.get_data() == original.get_data()
    named = event(f"{PREFIX}.add.req", a2amethod="sum")
    assert adaptor.with_method(named) is named
    foreign = event("com.example.news")
    assert adaptor.with_method(foreign) is foreign


def test_another_prefix_derives_its_own_types() -> None:
    own = Adaptor(prefix="acme.bus")
    assert own.method_of(event("acme.bus.orders.place.req")) == "orders/place"
    assert own.method_of(event(f"{PREFIX}.add.req")) is None
