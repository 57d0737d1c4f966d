"""The Kafka ingress leaves a native CloudEvent request unanswered when it names itself
a request by its type (``<prefix>.<method>.req``) rather than by ``mcptype``.

PROTOCOL.md section 3: "without ``mcptype`` a type ending in ``.req`` or ``.stream`` is a
request"; docs/gateway.md (the ingress): "each request is routed like any other and
answered ... on the topic in the record header ``reply-to``". The ingress decides
whether to answer from ``mcptype`` alone (a2a_bus/ingress.py ``_on_delivery``), so the
method runs and its answer is dropped: the caller waits forever, and nothing is
dead-lettered. Correct: the answer is produced on the reply topic, as for
``mcptype: request``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.ingress import Ingress
from a2a_bus.transport.base import Delivery

from .conftest import WAIT

pytestmark = pytest.mark.timeout(120)


async def _ask(bus: Bus, record: bytes, headers: list[tuple[str, bytes]]) -> list[Any]:
    replies: list[Any] = []

    async def deliver(delivery: Delivery) -> None:
        replies.append(delivery.event.get_data())

    async with Ingress(bus, timeout=WAIT) as ingress:
        await bus.transport.subscribe(
            [ingress.reply_topic], "replies", deliver, from_beginning=True
        )
        # a marker request after it: once its answer is in, the first had its chance
        marker = {"jsonrpc": "2.0", "method": "subtract", "params": [1, 1], "id": "marker"}
        await bus.transport.publish_raw(ingress.topic, record, key=b"k", headers=headers)
        await bus.transport.publish_raw(ingress.topic, orjson.dumps(marker), key=b"k")

        async def answered() -> None:
            while not any(isinstance(r, dict) and r.get("id") == "marker" for r in replies):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(answered(), WAIT)
    return [r for r in replies if not (isinstance(r, dict) and r.get("id") == "marker")]


async def test_a_structured_request_named_by_its_type_is_answered(either_bus: Bus) -> None:
    event = {
        "specversion": "1.0",
        "id": "by-type-1",
        "source": "/outside",
        "type": f"{either_bus.adaptor.prefix}.subtract.req",  # no mcptype
        "datacontenttype": "application/json",
        "data": {"minuend": 42, "subtrahend": 23},
    }
    headers = [("content-type", b"application/cloudevents+json")]
    replies = await _ask(either_bus, orjson.dumps(event), headers)
    assert replies == [{"jsonrpc": "2.0", "result": 19, "id": "by-type-1"}]


async def test_a_binary_request_named_by_its_type_is_answered(either_bus: Bus) -> None:
    headers = [
        ("ce_specversion", b"1.0"),
        ("ce_id", b"by-type-2"),
        ("ce_source", b"/outside"),
        ("ce_type", f"{either_bus.adaptor.prefix}.subtract.req".encode()),
        ("content-type", b"application/json"),
    ]
    replies = await _ask(either_bus, b"[42, 23]", headers)
    assert replies == [{"jsonrpc": "2.0", "result": 19, "id": "by-type-2"}]
