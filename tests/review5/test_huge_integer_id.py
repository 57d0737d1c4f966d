"""A JSON-RPC id that is an integer beyond 64 bits comes back as a different id.

The parser (orjson) reads integers above 2**64 - 1 as floats, so the request
``"id": 18446744073709551616`` is answered with ``"id": 1.8446744073709552e+19``: the
caller cannot match the answer to its request, and two callers whose huge ids round to
the same float get answers with equal ids. The JSON-RPC 2.0 specification: the
response id "MUST be the same as the value of the id member in the Request Object".
Correct: the id comes back exactly (the same digits), or, if such ids are not
supported, the request is refused with an error (-32600, id null) instead of being
executed and answered under an id the caller never sent. Seen over ``POST /rpc`` and
on the Kafka ingress (both parse with the same adaptor).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer

from a2a_bus.bus import Bus
from a2a_bus.ingress import Ingress

from .conftest import WAIT, Calc

pytestmark = pytest.mark.timeout(120)

HUGE = 2**64  # one past the largest unsigned 64-bit integer
BODY = b'{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": %d}' % HUGE


def _right(answer: dict[str, Any]) -> bool:
    """The same id back, or a refusal with id null."""
    if "error" in answer:
        return answer["id"] is None
    return type(answer["id"]) is int and answer["id"] == HUGE


async def test_rpc_answers_a_huge_integer_id_with_the_same_id(client: httpx.AsyncClient) -> None:
    response = await asyncio.wait_for(
        client.post("/rpc", content=BODY, headers={"content-type": "application/json"}), WAIT
    )
    answer = json.loads(response.text)  # the stdlib keeps big integers exact
    assert _right(answer), response.text


@pytest.mark.kafka
async def test_ingress_answers_a_huge_integer_id_with_the_same_id(kafka_bootstrap: str) -> None:
    prefix = f"r{uuid.uuid4().hex[:10]}"
    bus = Bus.kafka(kafka_bootstrap, bus_options={"prefix": prefix}, metadata_max_age_ms=1000)
    async with bus:
        await bus.aspawn(Calc)
        async with Ingress(bus, timeout=WAIT) as ingress:
            await bus.transport.publish_raw(ingress.topic, BODY)
            # read the answer's bytes as an outside consumer does (no bus decoding)
            consumer = AIOKafkaConsumer(
                ingress.reply_topic,
                bootstrap_servers=kafka_bootstrap,
                auto_offset_reset="earliest",
                group_id=None,
            )
            await asyncio.wait_for(consumer.start(), WAIT)
            try:
                record = await asyncio.wait_for(consumer.getone(), WAIT)
            finally:
                await asyncio.wait_for(consumer.stop(), WAIT)
    answer = json.loads(record.value)  # the stdlib keeps big integers exact
    assert _right(answer), record.value


async def test_rpc_passes_a_huge_integer_param_on_exactly(client: httpx.AsyncClient) -> None:
    """The same parse turns a params integer above 2**64 - 1 into a float: the agent
    computes on a different number and answers as if nothing happened (here
    ``identity(2**64)`` answers ``1.8446744073709552e+19``; a handler typed ``int``
    refuses it with -32602 "expected integer, got float", which the caller never
    sent). Correct: the agent gets the integer that was sent, or the request is
    refused with an error."""
    body = b'{"jsonrpc": "2.0", "method": "identity", "params": [%d], "id": 1}' % HUGE
    response = await asyncio.wait_for(
        client.post("/rpc", content=body, headers={"content-type": "application/json"}), WAIT
    )
    answer = json.loads(response.text)
    if "error" not in answer:
        assert type(answer["result"]) is int and answer["result"] == HUGE, response.text
