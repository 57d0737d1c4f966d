"""Property-based tests: the mapping is lossless and total, and the checks of events
from outside agree with the CloudEvents SDK where CloudEvents lets the SDK's be
(each difference stated where it is tested)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
import pytest
from cloudevents.core.bindings.http import to_binary
from cloudevents.core.exceptions import BaseCloudEventException
from cloudevents.core.formats.json import JSONFormat
from dateutil.parser import isoparse
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_bus.protocol import (
    Adaptor,
    CloudEvent,
    Failure,
    ProtocolError,
    events_equal,
    from_http,
    from_kafka,
    to_http,
    to_http_batch,
    to_kafka,
)
from a2a_bus.protocol.events import check_attributes, check_strings, parse_time

adaptor = Adaptor()


def is_control(char: str) -> bool:
    """CloudEvents 1.0, Type System, String: the characters a string may not hold."""
    return char <= "\x1f" or "\x7f" <= char <= "\x9f"


def has_control_character(event: CloudEvent) -> bool:
    return any(
        isinstance(value, str) and any(map(is_control, value))
        for value in event.get_attributes().values()
    )


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
    if has_control_character(event):  # a method named so: CloudEvents refuses its type
        with pytest.raises(ProtocolError, match="control character"):
            from_http(headers, body)
    else:
        assert events_equal(from_http(headers, body)[0], event)


@settings(max_examples=50)
@given(st.lists(messages(), min_size=1, max_size=5))
def test_http_batch_round_trip(batch: list[dict[str, Any]]) -> None:
    events = [e for e in adaptor.from_json(batch) if isinstance(e, CloudEvent)]
    headers, body = to_http_batch(events)
    if any(map(has_control_character, events)):
        with pytest.raises(ProtocolError, match="control character"):
            from_http(headers, body)
        return
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
# Text near and inside the control ranges turns up often, not once in a thousand draws.
edgy_text = st.text(st.sampled_from("a1 \x00\t\n\x1f\x7f\x85\x9f\xa0\u2028é"), max_size=5)
attribute_values = st.none() | st.text(max_size=5) | edgy_text | st.integers(-3, 3) | st.booleans()


@settings(max_examples=500)
@given(st.dictionaries(attribute_names, attribute_values, max_size=8))
def test_attribute_checks_agree_with_the_sdk(attributes: dict[str, Any]) -> None:
    """What an event from outside must pass (``check_attributes``, then
    ``check_strings`` at the HTTP binding) is what the SDK's validation asks, and
    one rule more: the SDK lets control characters through, which CloudEvents 1.0
    (Type System, String) forbids."""
    try:
        CloudEvent._validate_attribute(dict(attributes))
        sdk_ok = attributes.get("specversion") == "1.0"
    except BaseCloudEventException:
        sdk_ok = False
    try:
        check_attributes(dict(attributes))
        check_strings(attributes)
        ours_ok = True
    except ProtocolError:
        ours_ok = False
    controls = any(isinstance(v, str) and any(map(is_control, v)) for v in attributes.values())
    assert ours_ok == (sdk_ok and not controls)


@st.composite
def rfc3339_times(draw: st.DrawFn) -> str:
    """Any timestamp of RFC 3339's date-time grammar that a datetime can hold."""
    # A day inside datetime's range, so that no offset takes the moment out of it.
    moment = draw(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
    text = moment.isoformat(draw(st.sampled_from("Tt")), timespec="seconds")
    if draw(st.booleans()):
        text += "." + draw(st.from_regex(r"[0-9]{1,12}", fullmatch=True))
    if draw(st.booleans()):
        return text + draw(st.sampled_from("Zz"))
    hours, minutes = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    return text + f"{draw(st.sampled_from('+-'))}{hours:02d}:{minutes:02d}"


@settings(max_examples=300)
@given(rfc3339_times())
def test_every_rfc_3339_time_is_read_as_the_sdk_reads_it(text: str) -> None:
    """The SDK's parser (dateutil's isoparse) takes more of ISO 8601; of RFC 3339,
    the only form CloudEvents allows, both read every timestamp the same."""
    assert parse_time(text) == isoparse(text)


subject_text = st.text(max_size=12) | edgy_text


@settings(max_examples=300)
@given(subject_text, subject_text)
def test_sdk_binary_messages_decode_to_the_sdk_event(subject: str, region: str) -> None:
    """What the SDK sends in binary mode the HTTP binding reads back as sent (header
    values percent-encoded); strings with control characters, which the SDK does
    not check, are refused."""
    attributes = {"id": "e-1", "source": "s", "type": "t", "subject": subject, "region": region}
    try:
        sent = CloudEvent(attributes, None)
    except BaseCloudEventException:  # an empty subject: the SDK does not send it either
        return
    message = to_binary(sent, JSONFormat())
    if any(map(is_control, subject + region)):
        with pytest.raises(ProtocolError, match="control character"):
            from_http(message.headers, message.body)
        return
    [event] = from_http(message.headers, message.body)
    assert event.get_attributes() == sent.get_attributes()
