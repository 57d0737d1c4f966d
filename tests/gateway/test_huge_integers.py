"""An integer literal outside -2**63 .. 2**64-1 is refused where JSON enters the bus.

orjson, the parser, reads such an integer as a float (and cannot write one): the
request ``"id": 18446744073709551616`` was answered with ``"id":
1.8446744073709552e+19``, and ``identity(2**64)`` computed on a different number.
Every inbound parse goes through ``a2a_bus.protocol.parse_json``, which refuses the
message instead: over JSON-RPC -32600 Invalid Request with id null (the id itself
may be the number) and a ``data`` naming the integer; over ``POST /events`` a 400;
on the Kafka ingress the error is answered and the record dead-lettered with the
reason (both transports, Kafka against the real broker). Integers at the limits pass
exactly, and digits in a string are only a string.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from a2a_bus.bus import Bus
from a2a_bus.gateway.ingress import Ingress
from a2a_bus.transport.dead_letters import DLQ_REASON

from .agents import Spec
from .conftest import WAIT, ingress_replies

pytestmark = pytest.mark.timeout(120)

HUGE = 2**64  # one past the largest unsigned 64-bit integer
BODY = b'{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": %d}' % HUGE
OUT_OF_RANGE = "is outside the 64-bit range"


async def _rpc(client: httpx.AsyncClient, body: bytes) -> Any:
    response = await asyncio.wait_for(
        client.post("/rpc", content=body, headers={"content-type": "application/json"}), WAIT
    )
    assert response.status_code == 200, response.text
    return json.loads(response.text)  # the stdlib keeps big integers exact


def _refused(answer: Any, literal: int) -> bool:
    """-32600 with id null, naming the integer."""
    error = answer.get("error", {})
    return (
        answer.get("id", "absent") is None
        and error.get("code") == -32600
        and f"integer {str(literal)[:20]}" in str(error.get("data"))
        and OUT_OF_RANGE in str(error.get("data"))
    )


async def test_rpc_refuses_a_huge_integer_id(client: httpx.AsyncClient) -> None:
    answer = await _rpc(client, BODY)
    assert _refused(answer, HUGE), answer


@pytest.mark.parametrize("value", [HUGE, -(2**63) - 1, 10**30])
async def test_rpc_refuses_a_huge_integer_param(client: httpx.AsyncClient, value: int) -> None:
    body = b'{"jsonrpc": "2.0", "method": "echo", "params": [%d], "id": 1}' % value
    answer = await _rpc(client, body)
    assert _refused(answer, value), answer


async def test_rpc_refuses_a_batch_holding_a_huge_integer_as_a_whole(
    client: httpx.AsyncClient,
) -> None:
    body = b'[{"jsonrpc": "2.0", "method": "echo", "params": [1], "id": 1}, %s]' % BODY
    answer = await _rpc(client, body)
    assert _refused(answer, HUGE), answer  # one error object, as for unparsable JSON


@pytest.mark.parametrize("value", [2**64 - 1, -(2**63), 2**63])
async def test_rpc_passes_integers_at_the_limits_on_exactly(
    client: httpx.AsyncClient, value: int
) -> None:
    body = b'{"jsonrpc": "2.0", "method": "echo", "params": [%d], "id": %d}' % (value, value)
    answer = await _rpc(client, body)
    assert answer == {"jsonrpc": "2.0", "result": value, "id": value}
    assert type(answer["result"]) is int


async def test_rpc_passes_long_digit_strings_and_floats_on(client: httpx.AsyncClient) -> None:
    params = {"value": {"text": str(HUGE) * 3, "float": 1.5e300, "fraction": 0.1}}
    body = b'{"jsonrpc": "2.0", "method": "echo", "params": %s, "id": "s"}' % orjson.dumps(params)
    answer = await _rpc(client, body)
    assert answer == {"jsonrpc": "2.0", "result": params["value"], "id": "s"}


async def test_events_refuses_a_huge_integer_with_400(client: httpx.AsyncClient) -> None:
    structured = (
        b'{"specversion": "1.0", "id": "e-1", "source": "/outside", "type": "com.example.x",'
        b' "subject": "news.huge", "data": {"n": %d}}' % HUGE
    )
    binary = {
        "ce-specversion": "1.0",
        "ce-id": "e-2",
        "ce-source": "/outside",
        "ce-type": "com.example.x",
        "ce-subject": "news.huge",
        "content-type": "application/json",
    }
    sent = [
        (structured, {"content-type": "application/cloudevents+json"}),
        (b"[%s]" % structured, {"content-type": "application/cloudevents-batch+json"}),
        (b'{"n": %d}' % HUGE, binary),
    ]
    for body, headers in sent:
        response = await asyncio.wait_for(
            client.post("/events", content=body, headers=headers), WAIT
        )
        assert response.status_code == 400, response.text
        assert f"integer {HUGE} {OUT_OF_RANGE}" in response.text


async def test_the_ingress_answers_and_dead_letters_a_huge_integer(either_bus: Bus) -> None:
    bus = either_bus
    async with ingress_replies(bus) as (ingress, replies):
        await bus.transport.publish_raw(ingress.topic, BODY)

        async def answered() -> None:
            while not replies:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(answered(), WAIT)
    [answer] = replies
    assert _refused(answer, HUGE), answer
    assert bus.transport.dead_lettered == 1  # before the answer (the reason: below)


@pytest.mark.kafka
async def test_an_outside_consumer_reads_the_refusal_with_id_null(kafka_bootstrap: str) -> None:
    """The answer's bytes as an outside Kafka consumer reads them (no bus decoding),
    and the dead letter's reason."""
    prefix = f"r{uuid.uuid4().hex[:10]}"
    bus = Bus.kafka(kafka_bootstrap, bus_options={"prefix": prefix}, metadata_max_age_ms=1000)
    async with bus:
        await bus.aspawn(Spec)
        async with Ingress(bus.service, timeout=WAIT) as ingress:
            await bus.transport.publish_raw(ingress.topic, BODY)
            consumer = AIOKafkaConsumer(
                ingress.reply_topic,
                bus.topics.dlq,
                bootstrap_servers=kafka_bootstrap,
                auto_offset_reset="earliest",
                group_id=None,
            )
            await asyncio.wait_for(consumer.start(), WAIT)
            records: dict[str, Any] = {}
            try:
                while len(records) < 2:
                    record = await asyncio.wait_for(consumer.getone(), WAIT)
                    records[record.topic] = record
            finally:
                await asyncio.wait_for(consumer.stop(), WAIT)
    answer = records[ingress.reply_topic]
    assert _refused(json.loads(answer.value), HUGE), answer.value
    reason = dict(records[bus.topics.dlq].headers)[DLQ_REASON].decode()
    assert f"integer {HUGE} {OUT_OF_RANGE}" in reason, reason
