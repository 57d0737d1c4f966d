"""Gateway paths into the bus and the payload bound (a2a_bus.payload)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx

from a2a_bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from tests.bus.test_behaviour import WAIT, make_bus

__all__ = ["make_bus"]

MakeBus = Callable[..., Awaitable[Bus]]


async def test_events_endpoint_applies_the_payload_bound(make_bus: MakeBus) -> None:
    """Bug: POST /events (a2a_bus/gateway/events.py) publishes with
    ``bridge.publish`` -> ``transport.publish`` and never applies the payload bound the
    docs promise for "event data" on every transport (docs/bus.md: at most 1,000,000
    bytes, -32005 beyond). A binary-mode event of 800,000 bytes of octet-stream data is
    under the bound but, carried as data_base64 in Kafka's default structured mode,
    becomes a ~1,067,000-byte record the producer refuses: the gateway answers 500 on
    Kafka and 202 on memory. Correct: the same answer on both transports -- accepted
    (202) and delivered, or refused with a 4xx that says the event is too large."""
    bus = await make_bus()
    app = create_app(bus, GatewaySettings(request_timeout=WAIT))
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "blob-1",
        "ce-source": "https://example.com/review",
        "ce-type": "com.example.blob",
        "ce-subject": "review.blob",
        "content-type": "application/octet-stream",
    }
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        response = await asyncio.wait_for(
            http.post("/events", content=b"\x02" * 800_000, headers=headers), WAIT
        )
    assert response.status_code in (202, 413, 400), response.text
    if response.status_code != 202:
        return
    client = bus.async_client()
    for _ in range(200):  # a Kafka write may take a moment to be readable
        page = await asyncio.wait_for(client.read("review.blob"), WAIT)
        if page.events:
            break
        await asyncio.sleep(0.05)
    assert [e.get_id() for e in page.events] == ["blob-1"]
