"""Property-based tests: the mapping is lossless and total."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_bus.protocol import (
    Adaptor,
    CloudEvent,
    Failure,
    events_equal,
    from_http,
    from_kafka,
    to_http,
    to_http_batch,
    to_kafka,
)

adaptor = Adaptor()

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
names = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True)
methods = st.text(min_size=1, max_size=30).filter(lambda m: not m.startswith("rpc."))
ids = st.text(max_size=20) | st.integers(-(2**53), 2**53)


@st.composite
def params(draw: st.DrawFn) -> Any:
    if draw(st.booleans()):
        return draw(st.lists(json_values, max_size=4))
    value: dict[str, Any] = draw(
        st.dictionaries(st.text(max_size=8).filter(lambda k: not k.startswith("_")), json_values)
    )
    if draw(st.booleans()):
        value["_agentId"] = draw(names)
    if draw(st.booleans()):
        value["_topic"] = draw(names)
    if draw(st.booleans()):
        value["_seq"] = draw(st.integers(0, 2**31))
    if draw(st.booleans()):
        value["_sessionId"] = draw(names)
    return value


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["request", "notification", "result", "error"]))
    if kind in ("result", "error"):
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(ids | st.none())}
        if kind == "result":
            message["result"] = draw(json_values)
        else:
            message["error"] = {
                "code": draw(st.integers(-32768, 32767)),
                "message": draw(st.text()),
            }
        return message
    message = {"jsonrpc": "2.0", "method": draw(methods)}
    if draw(st.booleans()):
        message["params"] = draw(params())
    if kind == "request":
        message["id"] = draw(ids)
    return message


@settings(max_examples=300)
@given(messages())
def test_jsonrpc_to_event_to_jsonrpc_is_identity(message: dict[str, Any]) -> None:
    [event] = adaptor.from_json(message)
    assert isinstance(event, CloudEvent)
    assert adaptor.to_jsonrpc(event) == message


@settings(max_examples=200)
@given(st.lists(messages(), min_size=1, max_size=10))
def test_batches_split_into_one_event_per_element(batch: list[dict[str, Any]]) -> None:
    events = adaptor.from_bytes(orjson.dumps(batch))
    assert [adaptor.to_jsonrpc(e) for e in events if isinstance(e, CloudEvent)] == batch


@settings(max_examples=150)
@given(messages(), st.sampled_from(["binary", "structured"]))
def test_kafka_and_http_codecs_round_trip(message: dict[str, Any], mode: str) -> None:
    [event] = adaptor.from_json(message)
    assert isinstance(event, CloudEvent)
    record = to_kafka(event, mode)  # type: ignore[arg-type]
    assert events_equal(from_kafka(record.value, record.headers, record.key), event)
    headers, body = to_http(event, mode)  # type: ignore[arg-type]
    assert events_equal(from_http(headers, body)[0], event)


@settings(max_examples=50)
@given(st.lists(messages(), min_size=1, max_size=5))
def test_http_batch_round_trip(batch: list[dict[str, Any]]) -> None:
    events = [e for e in adaptor.from_json(batch) if isinstance(e, CloudEvent)]
    headers, body = to_http_batch(events)
    decoded = from_http(headers, body)
    assert len(decoded) == len(events)
    assert all(events_equal(a, b) for a, b in zip(decoded, events, strict=True))


@settings(max_examples=500)
@given(
    st.binary(max_size=300),
    st.sampled_from(
        [
            None,
            "application/cloudevents+json",
            "application/cloudevents-batch+json",
            "application/json",
            "text/plain",
        ]
    ),
)
def test_arbitrary_bytes_never_raise(body: bytes, content_type: str | None) -> None:
    results = adaptor.from_bytes(body, content_type)
    assert results
    for item in results:
        assert isinstance(item, CloudEvent | Failure)
        if isinstance(item, Failure):
            assert item.response()["error"]["code"] in (-32700, -32600, -32601, -32602)


@settings(max_examples=300)
@given(json_values)
def test_arbitrary_json_never_raises(value: Any) -> None:
    for item in adaptor.from_bytes(orjson.dumps(value)):
        assert isinstance(item, CloudEvent | Failure)


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "ce-specversion",
                    "ce-id",
                    "ce-source",
                    "ce-type",
                    "ce-time",
                    "ce-seq",
                    "content-type",
                    "ce_specversion",
                    "ce_id",
                ]
            ),
            st.text(max_size=30),
        ),
        max_size=8,
    ),
    st.binary(max_size=100),
)
def test_arbitrary_headers_never_raise(headers: list[tuple[str, str]], body: bytes) -> None:
    for item in adaptor.from_bytes(body, headers=headers):
        assert isinstance(item, CloudEvent | Failure)


attribute_names = st.sampled_from(
    [
        "id",
        "source",
        "type",
        "subject",
        "datacontenttype",
        "dataschema",
        "specversion",
        "targetagent",
        "seq",
        "data",
        "Upper",
        "with-dash",
        "x1",
        "",
    ]
)
attribute_values = st.none() | st.text(max_size=5) | st.integers(-3, 3) | st.booleans()


@settings(max_examples=500)
@given(st.dictionaries(attribute_names, attribute_values, max_size=8))
def test_attribute_checks_agree_with_the_sdk(attributes: dict[str, Any]) -> None:
    from cloudevents.core.exceptions import BaseCloudEventException

    from a2a_bus.protocol import ProtocolError
    from a2a_bus.protocol.events import check_attributes

    try:
        CloudEvent._validate_attribute(dict(attributes))
        sdk_ok = attributes.get("specversion") == "1.0"
    except BaseCloudEventException:
        sdk_ok = False
    try:
        check_attributes(dict(attributes))
        ours_ok = True
    except ProtocolError:
        ours_ok = False
    assert ours_ok == sdk_ok
