"""What one message may carry is the same on both transports: JSON, at most
MAX_PAYLOAD_BYTES of it. A sender over the limit is refused at once (-32005);
a handler's result or stream item that cannot travel reaches its caller as an
error at once, not as a timeout (Kafka) or as a Python object (in memory).

An event's envelope (its attributes) is bounded the same way: a sender over
MAX_ENVELOPE_BYTES gets -32005 saying the attributes are too large and nothing is
sent; an event at both bounds at once still fits a Kafka request.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ClassVar

import httpx
import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.client.aio import _OWN_ENVELOPE_CHARS
from a2a_bus.core.errors import transport_refusal
from a2a_bus.core.payload import (
    MAX_ENVELOPE_BYTES,
    MAX_ERROR_MESSAGE_CHARS,
    MAX_PAYLOAD_BYTES,
    envelope_refusal,
)
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.gateway.ingress import Ingress
from a2a_bus.protocol import DEFAULT_TYPE_PREFIX, ErrorCode, ext, new_event
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.dead_letters import DLQ_REASON
from a2a_bus.transport.errors import RecordTooLarge
from a2a_bus.transport.kafka.transport import KafkaTransport
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


# -- the envelope (an event's attributes) is bounded like its payload ----------------------

#: A method name that, with the request's other attributes, stays under the bound
#: although a request carries it three times (type, a2amethod, the JSON-RPC message).
LONG_METHOD = "m" * (MAX_ENVELOPE_BYTES // 3 - 200)


class Keeper(Agent):
    agent_id = "keeper"
    #: The text lengths ``length`` was called with.
    calls: ClassVar[list[int]] = []

    @method
    def length(self, text: str) -> int:
        self.calls.append(len(text))
        return len(text)

    @method
    def echo(self, text: str) -> str:
        return text

    @method
    def announce(self, size: int) -> str:
        self.client.publish("news.envelope", 1, big="x" * size)
        return "sent"

    @method(LONG_METHOD)
    def long(self) -> str:
        # The answer repeats the method name in its attributes: both bounds at once.
        return AT_LIMIT


def sized(attributes: dict[str, Any], size: int) -> dict[str, Any]:
    """``attributes`` plus a ``pad`` extension making their JSON exactly ``size`` bytes."""
    base = len(orjson.dumps({**attributes, "pad": ""}))
    return {**attributes, "pad": "p" * (size - base)}


def note(id: str, size: int) -> dict[str, Any]:
    """The attributes of a native event on ``news.envelope``, ``size`` bytes as JSON."""
    attributes = {
        "specversion": "1.0",
        "id": id,
        "source": "https://example.com/envelope",
        "type": "com.example.note",
        "subject": "news.envelope",
        "datacontenttype": "application/json",
    }
    return sized(attributes, size)


def call(id: str, size: int) -> dict[str, Any]:
    """The attributes of a native request for keeper's ``length``, ``size`` bytes as JSON."""
    attributes = {
        "specversion": "1.0",
        "id": id,
        "source": "https://example.com/envelope",
        "type": f"{DEFAULT_TYPE_PREFIX}.length.req",
        "mcptype": "request",
        "targetagent": "keeper",
        "datacontenttype": "application/json",
    }
    return sized(attributes, size)


async def _too_large(call: Awaitable[Any]) -> JsonRpcError:
    """What the bus answers for a publish the transport refuses as too large."""
    with pytest.raises(RecordTooLarge) as error:
        await asyncio.wait_for(call, WAIT)
    return transport_refusal(error.value)


def _says_attributes(error: JsonRpcError) -> None:
    assert error.code == ErrorCode.TOO_LARGE
    assert error.message == "Request too large"
    detail = str(error.data)
    assert "attributes" in detail, detail
    assert f"more than the {MAX_ENVELOPE_BYTES}" in detail, detail
    assert "'pad'" in detail or "'big'" in detail, detail  # names the culprit


async def _published(bus: Bus) -> list[str]:
    page = await asyncio.wait_for(bus.async_client().read("news.envelope"), WAIT)
    return [event.get_id() for event in page.events]


async def test_a_publish_over_the_envelope_bound_is_refused(make_bus: MakeBus) -> None:
    bus = await make_bus()
    client = bus.async_client()
    over = new_event(note("over", MAX_ENVELOPE_BYTES + 1), {"n": 1})
    _says_attributes(await _refused(client.publish_event(over)))
    huge = new_event(note("huge", 2_000_000), {"n": 1})
    _says_attributes(await _refused(client.publish_event(huge)))
    _says_attributes(await _refused(client.publish("news.envelope", 1, big="x" * 2_000_000)))
    assert await _published(bus) == []  # nothing was sent


async def test_an_event_at_both_bounds_is_delivered(make_bus: MakeBus) -> None:
    bus = await make_bus()
    at_limit = new_event(note("at-limit", MAX_ENVELOPE_BYTES), AT_LIMIT)
    await asyncio.wait_for(bus.async_client().publish_event(at_limit), WAIT)
    page = await asyncio.wait_for(bus.async_client().read("news.envelope"), WAIT)
    [event] = page.events
    assert event.get_id() == "at-limit"
    assert event.get_extension("pad") == at_limit.get_extension("pad")
    assert event.get_data() == AT_LIMIT


async def test_a_request_over_the_envelope_bound_is_answered_and_not_delivered(
    make_bus: MakeBus,
) -> None:
    bus = await make_bus(Keeper)
    Keeper.calls.clear()
    client = bus.async_client()
    over = new_event(call("over", MAX_ENVELOPE_BYTES + 1), {"text": "abc"})
    answer = await asyncio.wait_for(client.call_event(over), WAIT)
    assert answer is not None and answer["id"] == "over"
    _says_attributes(JsonRpcError.from_dict(answer["error"]))
    # A JSON-RPC id is an attribute too (the request event's id).
    message = {"jsonrpc": "2.0", "method": "length", "params": {"text": "a"}, "id": "i" * 20_000}
    answer = await asyncio.wait_for(client.call(message), WAIT)
    assert isinstance(answer, dict) and answer["error"]["code"] == ErrorCode.TOO_LARGE
    error = await _refused(client.request("keeper", "x" * MAX_ENVELOPE_BYTES))
    assert error.code == ErrorCode.TOO_LARGE and "(the largest is 'type')" in str(error.data)
    # Just under the bound, with a payload at its bound: delivered and answered.
    text = "t" * (MAX_PAYLOAD_BYTES - len('{"text":""}'))
    under = new_event(call("under", MAX_ENVELOPE_BYTES), {"text": text})
    answer = await asyncio.wait_for(client.call_event(under), WAIT)
    assert answer == {"jsonrpc": "2.0", "result": len(text), "id": "under"}
    assert Keeper.calls == [len(text)]


async def test_an_answer_repeating_a_long_method_name_travels(make_bus: MakeBus) -> None:
    """The bus builds answers: their envelope repeats the request's method, so a
    request under the envelope bound gets an answer that fits even with a result
    at the payload bound."""
    bus = await make_bus(Keeper)
    result = await asyncio.wait_for(bus.async_client().request("keeper", LONG_METHOD), WAIT)
    assert result == AT_LIMIT


async def test_a_handler_publishing_a_huge_envelope_gets_the_error(make_bus: MakeBus) -> None:
    bus = await make_bus(Keeper)
    error = await _refused(bus.async_client().request("keeper", "announce", [2_000_000]))
    _says_attributes(error)  # the handler's JsonRpcError is its caller's answer
    assert bus.metrics.restarts == 0
    assert await _published(bus) == []


async def test_post_events_over_the_envelope_bound_gets_413(make_bus: MakeBus) -> None:
    bus = await make_bus()
    app = create_app(bus, GatewaySettings(request_timeout=WAIT))
    over = {**note("over", MAX_ENVELOPE_BYTES + 1), "data": {"n": 1}}
    under = {**note("under", MAX_ENVELOPE_BYTES), "data": {"n": 2}}
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    headers = {"content-type": "application/cloudevents+json"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        refused = await asyncio.wait_for(
            http.post("/events", content=orjson.dumps(over), headers=headers), WAIT
        )
        accepted = await asyncio.wait_for(
            http.post("/events", content=orjson.dumps(under), headers=headers), WAIT
        )
    assert refused.status_code == 413, refused.text
    assert "attributes" in refused.text and f"more than the {MAX_ENVELOPE_BYTES}" in refused.text
    assert accepted.status_code == 202, accepted.text
    assert await _published(bus) == ["under"]


async def test_the_ingress_dead_letters_an_envelope_over_the_bound(make_bus: MakeBus) -> None:
    bus = await make_bus()
    letters: list[Delivery] = []
    arrived = asyncio.Event()

    async def collect(delivery: Delivery) -> None:
        letters.append(delivery)
        arrived.set()

    await bus.transport.subscribe([bus.topics.dlq], "letters", collect, from_beginning=True)
    # A record well under Kafka's limit, with attributes over the bus's bound (a
    # request would be answered -32005 on the reply topic instead).
    record = {**note("raw", 100_000), "data": {"n": 1}}
    async with Ingress(bus.service, timeout=WAIT) as ingress:
        await bus.transport.publish_raw(ingress.topic, orjson.dumps(record))
        await asyncio.wait_for(arrived.wait(), WAIT)
    [letter] = letters
    reason = dict(letter.headers)[DLQ_REASON].decode()
    assert reason.startswith("too-large: Request too large: "), reason
    assert "attributes" in reason, reason
    assert await _published(bus) == []


@pytest.mark.kafka
async def test_a_record_over_the_request_size_is_too_large_for_its_publisher(
    kafka_bootstrap: str,
) -> None:
    """What the bound misses (a transport used directly) reaches its publisher as
    the transport's RecordTooLarge (not an aiokafka exception), -32005 for the bus."""
    uid = uuid.uuid4().hex[:10]
    async with KafkaTransport(kafka_bootstrap, dlq_topic=f"test.dlq.{uid}") as kafka:
        assert isinstance(kafka, KafkaTransport)
        huge = new_event(note("direct", 2_000_000), {"n": 1})
        error = await _too_large(kafka.publish(f"test.envelope.{uid}", huge))
        assert error.code == ErrorCode.TOO_LARGE
        assert "more than the maximum request size" in str(error.data)
        error = await _too_large(kafka.publish_raw(f"test.envelope.{uid}", b"x" * 1_100_000))
        assert error.code == ErrorCode.TOO_LARGE


@pytest.mark.kafka
async def test_a_record_the_broker_refuses_is_too_large_for_its_publisher(
    kafka_bootstrap: str,
) -> None:
    """A topic whose max.message.bytes is below the producer's request size: the
    broker's refusal reaches the publisher as RecordTooLarge (-32005) too."""
    uid = uuid.uuid4().hex[:10]
    topic = f"test.small.{uid}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await asyncio.wait_for(admin.start(), WAIT)
    try:
        small = NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": "2000"})
        await asyncio.wait_for(admin.create_topics([small]), WAIT)
    finally:
        await admin.close()
    async with KafkaTransport(kafka_bootstrap, dlq_topic=f"test.dlq.{uid}") as kafka:
        assert isinstance(kafka, KafkaTransport)
        await asyncio.wait_for(kafka.publish(topic, new_event(note("fits", 500), 1)), WAIT)
        error = await _too_large(kafka.publish(topic, new_event(note("big", 500), "x" * 5000)))
        assert error.code == ErrorCode.TOO_LARGE
        assert "the broker refused the record" in str(error.data)
        # The refusal does not leave the partition's sequence numbers out of step:
        # later records of the same partition are written (not OutOfOrderSequenceNumber).
        for n in range(3):
            await asyncio.wait_for(kafka.publish(topic, new_event(note(f"after{n}", 500), n)), WAIT)
        batch = await asyncio.wait_for(kafka.read(topic, limit=10), WAIT)
        assert [event.get_data() for event in batch.events] == [1, 0, 1, 2]


@pytest.mark.parametrize("char", ["a", "\x01", '"', "é", "\U0001f600"])
def test_the_length_shortcut_never_passes_an_envelope_over_the_bound(char: str) -> None:
    """Around the bound, whatever a character costs in JSON (1 to 6 bytes), the
    check agrees with the exact size of the attributes."""
    base = note("e", 0)
    base.pop("pad")
    for count in range(MAX_ENVELOPE_BYTES // 6 - 100, MAX_ENVELOPE_BYTES + 1, 97):
        event = new_event({**base, "pad": char * count})
        size = len(orjson.dumps(event.get_attributes()))
        error = envelope_refusal(event)
        if size <= MAX_ENVELOPE_BYTES:
            assert error is None, (char, count, size)
        else:
            assert error is not None and error.code == ErrorCode.TOO_LARGE, (char, count, size)


@pytest.mark.parametrize("char", ["a", "\x01", "é"])
def test_the_shortcut_counts_a_json_rpc_message_s_method_and_id(char: str) -> None:
    base = note("e", 0)
    base.pop("pad")
    for count in range(MAX_ENVELOPE_BYTES // 6 - 100, MAX_ENVELOPE_BYTES + 1, 97):
        message = {"jsonrpc": "2.0", "method": char * count, "params": [], "id": 12345}
        event = new_event(dict(base), message)
        size = len(orjson.dumps(event.get_attributes())) + len(orjson.dumps(char * count)) + 5
        error = envelope_refusal(event)
        if size <= MAX_ENVELOPE_BYTES:
            assert error is None, (char, count, size)
        else:
            assert error is not None and error.code == ErrorCode.TOO_LARGE, (char, count, size)


def test_an_attribute_that_is_no_json_text_is_an_invalid_request() -> None:
    event = new_event({**note("e", 0), "pad": "\ud800"})
    error = envelope_refusal(event)
    assert error is not None and error.code == ErrorCode.INVALID_REQUEST
    assert str(error.data).startswith("the attributes of event 'e' are not JSON"), error.data


@pytest.mark.parametrize("make_bus", ["kafka"], indirect=True)
async def test_an_answer_kafka_refuses_is_replaced_by_the_error(make_bus: MakeBus) -> None:
    """A request produced straight onto an agent's topic skips the bus's checks:
    with a 300,000-character id its answer repeats the id three times (id,
    collaborationid and key) and, with its result, is over Kafka's size. The
    caller gets -32005 in its place, not silence until its timeout."""
    bus = await make_bus(Keeper)
    answers: list[Delivery] = []
    arrived = asyncio.Event()

    async def collect(delivery: Delivery) -> None:
        answers.append(delivery)
        arrived.set()

    reply_to = f"{bus.topics.prefix}.outside.replies"
    await bus.transport.subscribe([reply_to], "outside", collect, from_beginning=True)
    id = "i" * 300_000
    message = {"jsonrpc": "2.0", "method": "echo", "params": ["x" * 200_000], "id": id}
    request = {
        "specversion": "1.0",
        "id": id,
        "source": "https://example.com/outside",
        "type": f"{DEFAULT_TYPE_PREFIX}.echo.req",
        "mcptype": "request",
        "a2amethod": "echo",
        ext.REPLY_TO: reply_to,
        "datacontenttype": "application/json",
        "data": message,
    }
    await bus.transport.publish_raw(bus.topics.agent("keeper"), orjson.dumps(request))
    await asyncio.wait_for(arrived.wait(), WAIT)
    [answer] = answers
    data = answer.event.get_data()
    assert isinstance(data, dict) and data["id"] == id
    assert data["error"]["code"] == ErrorCode.TOO_LARGE
    assert data["error"]["message"] == "Response too large"
    assert "more than the maximum request size" in data["error"]["data"]


@pytest.mark.parametrize("char", ["a", "\x01", "é", "\U0001f600"])
def test_a_client_message_below_the_unmeasured_size_is_within_the_bound(char: str) -> None:
    """The client measures the envelope of a message it makes only past
    ``_OWN_ENVELOPE_CHARS`` of method name and agent id: below that, whatever the
    characters cost in JSON, the envelope is within the bound."""
    client = Bus.memory().async_client()
    for agent_chars in (0, 1, _OWN_ENVELOPE_CHARS // 2):
        method = char * (_OWN_ENVELOPE_CHARS - agent_chars)
        agent = char * agent_chars if agent_chars else None
        event = client._event(agent, method, {"x": 1}, request=True)
        assert envelope_refusal(event) is None, (char, agent_chars)
