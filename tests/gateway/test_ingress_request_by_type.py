"""The Kafka ingress answers a native CloudEvent that is a request by its type alone.

PROTOCOL.md section 3: without ``mcptype`` a type ending in ``.req`` or ``.stream``
is a request (``a2a_bus.protocol.event_kind``). Such an event, structured or binary,
is routed, run and answered on the reply topic like one with ``mcptype: request``;
a type without the suffix is a notification and gets no answer. On both transports
(Kafka: the real broker).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from a2a_bus.bus import Bus

from .conftest import WAIT, ingress_replies

pytestmark = pytest.mark.timeout(120)


async def _ask(bus: Bus, record: bytes, headers: list[tuple[str, bytes]]) -> list[Any]:
    """What the ingress answers to ``record`` (a marker request after it is answered
    too: once its answer is in, the first record had its chance)."""
    async with ingress_replies(bus) as (ingress, replies):
        marker = {"jsonrpc": "2.0", "method": "subtract", "params": [1, 1], "id": "marker"}
        await bus.transport.publish_raw(ingress.topic, record, key=b"k", headers=headers)
        await bus.transport.publish_raw(ingress.topic, orjson.dumps(marker), key=b"k")

        async def answered() -> None:
            while not any(isinstance(r, dict) and r.get("id") == "marker" for r in replies):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(answered(), WAIT)
    return [r for r in replies if not (isinstance(r, dict) and r.get("id") == "marker")]


def _structured(bus: Bus, type_suffix: str, id: str) -> tuple[bytes, list[tuple[str, bytes]]]:
    event = {
        "specversion": "1.0",
        "id": id,
        "source": "/outside",
        "type": f"{bus.adaptor.prefix}.subtract{type_suffix}",  # no mcptype
        "datacontenttype": "application/json",
        "data": {"minuend": 42, "subtrahend": 23},
    }
    return orjson.dumps(event), [("content-type", b"application/cloudevents+json")]


async def test_a_structured_request_named_by_its_type_is_answered(either_bus: Bus) -> None:
    replies = await _ask(either_bus, *_structured(either_bus, ".req", "by-type-1"))
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


async def test_an_event_whose_type_names_no_request_is_not_answered(either_bus: Bus) -> None:
    replies = await _ask(either_bus, *_structured(either_bus, "", "by-type-3"))
    assert replies == []
