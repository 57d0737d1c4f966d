"""What one message may carry is the same on both transports: JSON, at most
MAX_PAYLOAD_BYTES of it. A sender over the limit is refused at once (-32005);
a handler's result or stream item that cannot travel reaches its caller as an
error at once, not as a timeout (Kafka) or as a Python object (in memory)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ClassVar

import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.core.payload import MAX_ERROR_MESSAGE_CHARS, MAX_PAYLOAD_BYTES
from a2a_bus.protocol import DEFAULT_TYPE_PREFIX, ErrorCode, new_event
from tests.buses import WAIT, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]

#: A string whose JSON form (with its quotes) is one byte over the limit.
OVER = "x" * (MAX_PAYLOAD_BYTES - 1)
#: A string whose JSON form is exactly the limit.
AT_LIMIT = "x" * (MAX_PAYLOAD_BYTES - 2)


class Maker(Agent):
    agent_id = "maker"
    #: Whether the generator's finally block ran, per call.
    closed: ClassVar[list[bool]] = []

    @method
    def text(self, size: int) -> str:
        return "x" * size

    @method
    def length(self, text: str) -> int:
        return len(text)

    @method
    def odd(self) -> Any:
        return {1, 2}

    @method
    def items(self, size: int) -> Iterator[str]:
        try:
            yield "a"
            yield "b"
            yield "x" * size
            yield "never sent"
        finally:
            self.closed.append(True)

    @method
    def refuse(self, message: str, times: int, surrogate: bool = False) -> None:
        tail = "\ud800" if surrogate else ""  # no JSON text holds a lone surrogate
        raise JsonRpcError(-32050, message * times + tail, {"why": "asked"})

    @method
    def refuse_oddly(self) -> None:
        raise JsonRpcError(-32051, {"not": "a string"})  # type: ignore[arg-type]

    @method
    def announce(self, size: int) -> str:
        self.client.publish("news.big", "x" * size)
        return "sent"


async def _refused(call: Awaitable[Any]) -> JsonRpcError:
    with pytest.raises(JsonRpcError) as error:
        await asyncio.wait_for(call, WAIT)
    return error.value


async def test_a_payload_at_the_limit_travels(make_bus: MakeBus) -> None:
    bus = await make_bus(Maker)
    client = bus.async_client()
    # The params object, as JSON, is exactly the limit.
    text = "x" * (MAX_PAYLOAD_BYTES - len('{"text":""}'))
    assert await asyncio.wait_for(client.request("maker", "length", {"text": text}), WAIT) == len(
        text
    )
    result = await asyncio.wait_for(client.request("maker", "text", [len(AT_LIMIT)]), WAIT)
    assert result == AT_LIMIT


async def test_a_request_over_the_limit_is_refused_before_it_is_sent(make_bus: MakeBus) -> None:
    bus = await make_bus(Maker)
    client = bus.async_client()
    error = await _refused(client.request("maker", "length", {"text": OVER}))
    assert error.code == ErrorCode.TOO_LARGE
    assert error.message == "Request too large"
    assert f"more than the {MAX_PAYLOAD_BYTES} one message may carry" in str(error.data)
    error = await _refused(client.publish("news.big", OVER))
    assert error.code == ErrorCode.TOO_LARGE
    error = await _refused(client.publish("news.big", OVER.encode() + b"xx"))
    assert error.code == ErrorCode.TOO_LARGE
    page = await asyncio.wait_for(client.read("news.big"), WAIT)
    assert page.events == []  # nothing was sent


async def test_a_result_over_the_limit_is_an_error_at_once(make_bus: MakeBus) -> None:
    bus = await make_bus(Maker)
    error = await _refused(bus.async_client().request("maker", "text", [len(OVER)]))
    assert error.code == ErrorCode.TOO_LARGE
    assert error.message == "Response too large"
    assert str(error.data).startswith("the result is 1000001 bytes")


async def test_a_result_that_is_not_json_is_an_internal_error(make_bus: MakeBus) -> None:
    bus = await make_bus(Maker)
    error = await _refused(bus.async_client().request("maker", "odd"))
    assert error.code == ErrorCode.INTERNAL_ERROR
    assert error.data == "the result is not JSON: Type is not JSON serializable: set"


async def test_an_error_message_is_one_that_travels(make_bus: MakeBus) -> None:
    """A JSON-RPC error's message is cut to MAX_ERROR_MESSAGE_CHARS (Kafka would refuse
    2 MB of it; JSON-RPC asks for one sentence), a lone surrogate is escaped (no JSON
    text holds one) and a message that is no string is made one, the same on both
    transports; code and data are kept."""
    bus = await make_bus(Maker)
    client = bus.async_client()
    error = await _refused(client.request("maker", "refuse", ["ab", 1_000_000]))
    assert error.code == -32050 and error.data == {"why": "asked"}
    cut = len("ab" * 1_000_000) - MAX_ERROR_MESSAGE_CHARS
    kept = "ab" * (MAX_ERROR_MESSAGE_CHARS // 2)
    assert error.message == f"{kept}... ({cut} characters left out)"
    error = await _refused(client.request("maker", "refuse", ["bad ", 1, True]))
    assert error.message == "bad \\ud800" and error.code == -32050
    error = await _refused(client.request("maker", "refuse", ["fine", 1]))
    assert error.message == "fine"
    error = await _refused(client.request("maker", "refuse_oddly"))
    assert error.code == -32051 and error.message == "{'not': 'a string'}"


async def test_a_stream_ends_with_the_error_at_an_item_too_large(make_bus: MakeBus) -> None:
    bus = await make_bus(Maker)
    Maker.closed.clear()
    received: list[str] = []
    with pytest.raises(JsonRpcError) as error:
        async for item in bus.async_client().stream("maker", "items", [len(OVER)]):
            received.append(item)
    assert received == ["a", "b"]
    assert error.value.code == ErrorCode.TOO_LARGE
    assert str(error.value.data).startswith("chunk 2 is 1000001 bytes")
    assert Maker.closed == [True]  # the generator was closed, not left running


async def test_a_handler_publishing_too_much_gets_the_error(make_bus: MakeBus) -> None:
    bus = await make_bus(Maker)
    error = await _refused(bus.async_client().request("maker", "announce", [len(OVER)]))
    # A JsonRpcError raised in the handler: the caller's answer, not a crash.
    assert error.code == ErrorCode.TOO_LARGE
    assert bus.metrics.restarts == 0


async def test_a_gateway_event_over_the_limit_is_answered(make_bus: MakeBus) -> None:
    bus = await make_bus(Maker)
    message = {"jsonrpc": "2.0", "method": "length", "params": {"text": OVER}, "id": 7}
    response = await asyncio.wait_for(bus.async_client().call(message), WAIT)
    assert isinstance(response, dict)
    assert response["id"] == 7
    assert response["error"]["code"] == ErrorCode.TOO_LARGE


async def test_bytes_are_measured_as_the_base64_json_carries(make_bus: MakeBus) -> None:
    # 800,000 bytes are 1,066,668 as base64, the form Kafka's structured mode carries:
    # refused on both transports rather than by the Kafka producer alone.
    bus = await make_bus()
    client = bus.async_client()
    error = await _refused(client.publish("news.big", b"\x01" * 800_000))
    assert error.code == ErrorCode.TOO_LARGE
    assert str(error.data) == (
        "data is 1066668 bytes as base64, more than the 1000000 one message may carry"
    )
    fits = b"\x01" * (MAX_PAYLOAD_BYTES // 4 * 3)
    await asyncio.wait_for(client.publish("news.fits", fits), WAIT)
    page = await asyncio.wait_for(client.read("news.fits"), WAIT)
    assert [event.get_data() for event in page.events] == [fits]


async def test_a_native_request_refused_for_size_is_answered_with_its_id(
    make_bus: MakeBus,
) -> None:
    bus = await make_bus(Maker)
    event = new_event(
        {
            "source": "https://example.com/producer",
            "type": f"{DEFAULT_TYPE_PREFIX}.length.req",
            "mcptype": "request",
        },
        {"text": OVER},
    )
    answer = await asyncio.wait_for(bus.async_client().call_event(event), WAIT)
    assert answer is not None
    assert answer["error"]["code"] == ErrorCode.TOO_LARGE
    assert answer["id"] == event.get_id()  # as any answer to a native request
