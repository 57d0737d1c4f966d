"""Payload bound (a2a_bus.payload): what the checks let through that a transport refuses."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

from a2a_bus import Bus, JsonRpcError
from a2a_bus.protocol import DEFAULT_TYPE_PREFIX, CloudEvent, ErrorCode
from tests.bus.agents import Echo
from tests.bus.test_behaviour import WAIT, make_bus

__all__ = ["make_bus"]

MakeBus = Callable[..., Awaitable[Bus]]


async def test_bytes_data_under_the_bound_is_published_or_refused_with_32005(
    make_bus: MakeBus,
) -> None:
    """Bug: bytes data is measured by its length (payload.check_payload with binary=True),
    but the Kafka transport's default content mode is structured, which carries bytes as
    ``data_base64`` (4/3 of the size). 800,000 bytes pass the 1,000,000-byte check and
    become a ~1,066,700-byte record, which the Kafka producer refuses (aiokafka's
    MessageSizeTooLargeError) -- the very failure the bound was made to prevent; the
    in-memory transport carries it. Correct: the same answer on both transports, either
    the event is published and readable, or publish raises JsonRpcError -32005 before
    anything is sent."""
    bus = await make_bus()
    client = bus.async_client()
    data = b"\x01" * 800_000
    try:
        await asyncio.wait_for(client.publish("review.blob", data), WAIT)
    except JsonRpcError as exc:
        assert exc.code == ErrorCode.TOO_LARGE
        return
    counts: list[int] = []
    for _ in range(200):  # a Kafka write may take a moment to be readable
        page = await asyncio.wait_for(client.read("review.blob"), WAIT)
        counts.append(len(page.events))
        if page.events:
            assert page.events[0].get_data() == data
            break
        await asyncio.sleep(0.05)
    assert counts[-1] == 1


async def test_a_native_request_refused_for_size_is_answered_with_its_id(
    make_bus: MakeBus,
) -> None:
    """Bug: AsyncClient.call_event (a2a_bus/client.py) answers a request whose data is
    over the bound with ``id = message.get("id") if isinstance(message, dict) else
    event.get_id()``. A native CloudEvent request (PROTOCOL.md section 3) has plain data,
    often an object without "id": the refusal then carries ``"id": null`` although
    Bus.send answers such a request with the event's id (see
    tests/bus/test_native_event_method.py), so a producer on the raw ingress cannot match
    the -32005 to its request. Correct: the error response's id is the event id, as for
    every other answer to a native request."""
    bus = await make_bus(Echo)
    event = CloudEvent(
        {
            "id": uuid.uuid4().hex,
            "source": "https://example.com/producer",
            "type": f"{DEFAULT_TYPE_PREFIX}.echo.req",
            "mcptype": "request",
        },
        {"value": "x" * 1_000_100},
    )
    answer = await asyncio.wait_for(bus.async_client().call_event(event), WAIT)
    assert answer is not None
    assert answer["error"]["code"] == ErrorCode.TOO_LARGE
    assert answer["id"] == event.get_id()
