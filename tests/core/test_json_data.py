"""Data that is not JSON is refused at the client, the same way on both transports:
``publish`` data, ``request``/``notify`` params and ``stream_to`` chunks get -32602
naming the problem, and nothing is sent."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from a2a_bus import Bus, JsonRpcError
from tests.agents import Calc, Echo
from tests.buses import WAIT, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]

NOT_JSON: list[tuple[Any, str]] = [
    (object(), "data is not JSON: Type is not JSON serializable: object"),
    ({1, 2}, "data is not JSON: Type is not JSON serializable: set"),
    ({1: "a"}, "data is not JSON: Dict key must be str"),
    ({"x": [1, float("nan")]}, "data['x'][1] is not JSON: NaN"),
    (float("inf"), "data is not JSON: NaN and infinities"),
    ([{"deep": {"er": -float("inf")}}], "data[0]['deep']['er'] is not JSON"),
]


async def _refused(call: Awaitable[Any]) -> JsonRpcError:
    with pytest.raises(JsonRpcError) as error:
        await asyncio.wait_for(call, WAIT)
    assert (error.value.code, error.value.message) == (-32602, "Invalid params")
    assert isinstance(error.value.data, str)
    return error.value


@pytest.mark.parametrize(("data", "detail"), NOT_JSON)
async def test_publish_refuses_data_that_is_not_json(
    make_bus: MakeBus, data: Any, detail: str
) -> None:
    bus = await make_bus()
    client = bus.async_client()
    error = await _refused(client.publish("orders.x", data))
    assert error.data.startswith(detail)
    await client.publish("orders.x", {"ok": None, "price": 1.5})  # null alone is fine
    page = await asyncio.wait_for(client.read("orders.x"), WAIT)
    assert [event.get_data() for event in page.events] == [{"ok": None, "price": 1.5}]


@pytest.mark.parametrize(
    ("extensions", "detail"),
    [
        ({"targetagent": "echo"}, "'targetagent' is the bus's to set"),  # would go to an inbox
        ({"source": "/me"}, "'source' is the bus's to set"),
        ({"specversion": "0.3"}, "'specversion' is the bus's to set"),
        ({"Bad-Name": "x"}, "invalid extension attribute name 'Bad-Name'"),
        ({"region": {"a": 1}}, "extension 'region' must be a string, a 64-bit integer"),
        ({"count": 2**64}, "extension 'count' must be"),
        ({"type": 5}, "type must be a non-empty string"),
        ({"type": ""}, "type must be a non-empty string"),
        ({"id": ""}, "id must be a non-empty string"),
        # CloudEvents strings hold no control characters: every door from outside refuses them.
        ({"type": "order\ncreated"}, "attribute 'type' holds the control character"),
        ({"region": "eu\x00"}, "attribute 'region' holds the control character"),
    ],
)
async def test_publish_refuses_attributes_a_publisher_may_not_set(
    make_bus: MakeBus, extensions: dict[str, Any], detail: str
) -> None:
    """Each would send the event elsewhere, or as something else, than publish says;
    on Kafka some would not even be decoded by the subscribers."""
    bus = await make_bus(Echo)
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as error:
        await asyncio.wait_for(client.publish("orders.x", {"n": 1}, **extensions), WAIT)
    assert (error.value.code, error.value.message) == (-32600, "Invalid Request")
    assert detail in error.value.data
    await client.publish("orders.x", {"n": 2}, region="eu", priority=3, urgent=True)
    page = await asyncio.wait_for(client.read("orders.x"), WAIT)
    [event] = page.events
    assert (event.get_data(), event.get_extension("region")) == ({"n": 2}, "eu")


async def test_request_and_notify_refuse_params_that_are_not_json(make_bus: MakeBus) -> None:
    bus = await make_bus(Echo, Calc)
    client = bus.async_client()
    error = await _refused(client.request("echo", "echo", [object()]))
    assert error.data == "params is not JSON: Type is not JSON serializable: object"
    error = await _refused(client.request("echo", "echo", {"value": float("nan")}))
    assert error.data.startswith("params['value'] is not JSON: NaN")
    error = await _refused(client.notify("echo", "echo", [float("inf")]))
    assert error.data.startswith("params[0] is not JSON")
    # The first chunk: a stream refused midway would leave the handler waiting for the rest.
    error = await _refused(client.stream_to("calc", "collect", [float("nan"), 3]))
    assert error.data.startswith("params['chunk'] is not JSON")
    assert bus.metrics.requests == 0
    # The same values as JSON go through.
    assert await asyncio.wait_for(client.request("echo", "echo", [{"v": None}]), WAIT) == {
        "v": None
    }


def test_sync_client_refuses_the_same() -> None:
    with Bus.memory(heartbeat=60.0) as bus:
        client = bus.client()
        with pytest.raises(JsonRpcError) as error:
            client.publish("orders.x", object())
        assert error.value.code == -32602
        with pytest.raises(JsonRpcError) as error:
            client.request("echo", "echo", [float("nan")])
        assert error.value.data.startswith("params[0] is not JSON")
