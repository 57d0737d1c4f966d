"""-32600 has one shape everywhere: ``"Invalid Request"`` with the detail in ``data``."""

from __future__ import annotations

import pytest

from a2a_bus import Bus, JsonRpcError
from a2a_bus.core.routing import RoutingError, Topics, validate_name, validate_subject


@pytest.mark.parametrize(
    ("check", "detail"),
    [
        (lambda: validate_name("no body!"), "invalid agent id 'no body!': must match"),
        (lambda: validate_subject("a..b"), "invalid subject 'a..b': segments are"),
        (lambda: validate_subject(""), "invalid subject ''"),
        (lambda: Topics("bad prefix"), "invalid topic prefix 'bad prefix'"),
    ],
)
def test_a_bad_name_answers_invalid_request_with_the_detail_in_data(
    check: object, detail: str
) -> None:
    with pytest.raises(RoutingError) as raised:
        check()  # type: ignore[operator]
    assert str(raised.value).startswith(detail)  # Python callers still read the detail
    error = raised.value.json_rpc_error()
    assert (error.code, error.message) == (-32600, "Invalid Request")
    assert error.data.startswith(detail)
    assert error.to_dict() == {"code": -32600, "message": "Invalid Request", "data": error.data}


def test_other_codes_keep_their_message_and_data() -> None:
    error = RoutingError(-32601, "Method not found", "nope").json_rpc_error()
    assert (error.code, error.message, error.data) == (-32601, "Method not found", "nope")


def test_publish_to_an_invalid_subject_is_invalid_request_with_data() -> None:
    with Bus.memory(heartbeat=60.0) as bus, pytest.raises(JsonRpcError) as raised:
        bus.client().publish("bad subject!", {"n": 1})
    assert (raised.value.code, raised.value.message) == (-32600, "Invalid Request")
    assert raised.value.data.startswith("invalid subject 'bad subject!'")


def test_a_request_or_stream_to_an_invalid_agent_id_is_invalid_request_with_data() -> None:
    with Bus.memory(heartbeat=60.0) as bus:
        client = bus.client()
        with pytest.raises(JsonRpcError) as raised:
            client.request("no body!", "echo", {})
        assert (raised.value.code, raised.value.message) == (-32600, "Invalid Request")
        assert raised.value.data.startswith("invalid agent id 'no body!'")
        with pytest.raises(JsonRpcError) as streamed:
            list(client.stream("no body!", "count", {"to": 2}))
        assert (streamed.value.code, streamed.value.message) == (-32600, "Invalid Request")
        assert streamed.value.data.startswith("invalid agent id 'no body!'")
