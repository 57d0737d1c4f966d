"""The slow note taker: its task is seen working, then noted; a cancel stops it."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from a2a_bus.bus import Bus
from a2a_bus.examples.scribe import Scribe
from a2a_bus.gateway import GatewaySettings, create_app

pytestmark = pytest.mark.timeout(60)
WAIT = 20.0


class QuickScribe(Scribe):
    agent_id = "scribe"
    pace = 0.5


async def call(http: httpx.AsyncClient, method: str, params: dict[str, object]) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = await asyncio.wait_for(http.post("/a2a/scribe", json=body), WAIT)
    return dict(response.json())


async def test_a_note_is_working_then_noted_and_a_cancel_stops_one() -> None:
    async with Bus.memory() as bus:
        await bus.aspawn(QuickScribe, 2)
        settings = GatewaySettings(request_timeout=WAIT, a2a_blocking_wait=0.1)
        transport = httpx.ASGITransport(app=create_app(bus, settings))
        async with httpx.AsyncClient(transport=transport, base_url="http://g") as http:
            tasks = []
            for text in ("keep", "drop"):
                message = {"messageId": text, "role": "ROLE_USER", "parts": [{"text": text}]}
                sent = await call(http, "SendMessage", {"message": message})
                task = sent["result"]["task"]
                assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
                tasks.append(task["id"])
            canceled = await call(http, "CancelTask", {"id": tasks[1]})
            assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
            while True:
                got = (await call(http, "GetTask", {"id": tasks[0]}))["result"]
                if got["status"]["state"] == "TASK_STATE_COMPLETED":
                    break
                assert got["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
                await asyncio.sleep(0.05)
            assert got["artifacts"][0]["parts"] == [{"text": "noted: keep"}]
