"""POST /events applies the payload bound of every transport (a2a_bus.core.payload)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx

from a2a_bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from tests.buses import WAIT, make_bus

__all__ = ["make_bus"]

MakeBus = Callable[..., Awaitable[Bus]]


async def test_events_over_the_payload_bound_get_413(make_bus: MakeBus) -> None:
    """An event whose data is over the bound (bytes count as base64: 800,000 are
    1,066,668) is refused with 413 on both transports, nothing published; before,
    Kafka's producer refused it (500) and memory accepted it (202)."""
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
    assert response.status_code == 413, response.text
    assert "as base64, more than the 1000000 one message may carry" in response.text
    page = await asyncio.wait_for(bus.async_client().read("review.blob"), WAIT)
    assert page.events == []
