"""Two gateway replicas over one bus (in memory; ``test_tasks_on_kafka`` runs them as
processes on Kafka): the same send, or the same next turn, given to both at once
runs the agent once, whatever ``source`` each replica stamps on its events (here the
replicas rarely race: the processes of ``test_tasks_on_kafka`` do); a task stays
readable after its agent went away."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from a2a_bus import Agent, InputRequired, method
from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.transport.memory import MemoryTransport

from .test_a2a import BASE, WAIT, within

pytestmark = pytest.mark.timeout(120)

CARD = "/a2a/tally/.well-known/agent-card.json"

HEARTBEAT = 0.2
#: Runs of each handler call, by its text.
RUNS: collections.Counter[str] = collections.Counter()


class Tally(Agent):
    """Counts its runs; ``ask ...`` asks for input first."""

    agent_id = "tally"

    @method
    def message(self, text: str) -> str:
        RUNS[text] += 1
        time.sleep(0.02)  # both replicas' requests are on their way meanwhile
        if text.startswith("ask"):
            raise InputRequired("and then?")
        return f"ran {text}"


@pytest.fixture
async def buses() -> AsyncIterator[tuple[Bus, Bus, Bus]]:
    """Nodes on one in-memory broker, as processes on one Kafka: two for gateways,
    one for the agent (its card lives while it heartbeats)."""
    transport = MemoryTransport()
    agents = Bus(transport, node="agents", heartbeat=HEARTBEAT)
    agents.spawn(Tally, 2)
    gateways = [Bus(transport, node=f"node-{n}", card_ttl=3 * HEARTBEAT) for n in "ab"]
    async with agents, gateways[0], gateways[1]:
        yield agents, gateways[0], gateways[1]


@pytest.fixture
async def replicas(buses: tuple[Bus, Bus, Bus]) -> AsyncIterator[list[httpx.AsyncClient]]:
    """A gateway on each node, each with a ``source`` of its own."""
    clients = []
    for name, bus in zip("ab", buses[1:], strict=True):
        settings = GatewaySettings(request_timeout=WAIT, source=f"gateway-{name}")
        transport = httpx.ASGITransport(app=create_app(bus, settings))
        clients.append(httpx.AsyncClient(transport=transport, base_url=BASE, timeout=WAIT))
    yield clients
    for client in clients:
        await client.aclose()


async def rpc(http: httpx.AsyncClient, method_name: str, params: Any) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method_name, "params": params}
    response = await within(http.post("/a2a/tally", content=orjson.dumps(body)))
    assert response.status_code == 200, response.text
    return response.json()


def message(text: str, **more: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **more}


async def send_to_both(replicas: list[httpx.AsyncClient], sent: dict[str, Any]) -> list[Any]:
    answers = await asyncio.gather(*(rpc(r, "SendMessage", {"message": sent}) for r in replicas))
    assert all("result" in a for a in answers), answers
    return [a["result"]["task"] for a in answers]


async def test_the_same_send_to_two_replicas_at_once_runs_once(
    replicas: list[httpx.AsyncClient],
) -> None:
    for i in range(5):
        text = f"once {i} {uuid.uuid4().hex}"
        tasks = await send_to_both(replicas, message(text))
        assert tasks[0]["id"] == tasks[1]["id"]
        assert {t["status"]["state"] for t in tasks} == {"TASK_STATE_COMPLETED"}
        assert RUNS[text] == 1


async def test_the_same_next_turn_to_two_replicas_at_once_runs_once(
    replicas: list[httpx.AsyncClient],
) -> None:
    for i in range(5):
        first = f"ask {i} {uuid.uuid4().hex}"
        (asked,) = await send_to_both(replicas[:1], message(first))
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        text = f"then {i} {uuid.uuid4().hex}"
        turn = {"message": message(text, taskId=asked["id"], contextId=asked["contextId"])}
        answers = await asyncio.gather(*(rpc(r, "SendMessage", turn) for r in replicas))
        # A replica that sees the turn taken already refuses the repeat.
        tasks = [a["result"]["task"] for a in answers if "result" in a]
        refused = [a["error"]["code"] for a in answers if "error" in a]
        assert tasks and refused in ([], [-32004]), answers
        assert {t["id"] for t in tasks} == {asked["id"]}
        assert {t["status"]["state"] for t in tasks} == {"TASK_STATE_COMPLETED"}
        assert RUNS[text] == 1


async def test_a_task_stays_readable_after_its_agent_went_away(
    buses: tuple[Bus, Bus, Bus], replicas: list[httpx.AsyncClient]
) -> None:
    (task,) = await send_to_both(replicas[:1], message("before it went"))
    await buses[0].announcer.stop()  # no more heartbeats: its card expires, as when it dies
    for replica in replicas:
        await within(gone(replica))
        found = (await rpc(replica, "GetTask", {"id": task["id"]}))["result"]
        assert found["status"]["state"] == "TASK_STATE_COMPLETED"
        listed = (await rpc(replica, "ListTasks", {}))["result"]
        assert [t["id"] for t in listed["tasks"]] == [task["id"]]
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message("x")}}
    refused = await within(replicas[0].post("/a2a/tally", content=orjson.dumps(body)))
    assert refused.status_code == 404 and refused.json()["error"]["code"] == -32601


async def gone(replica: httpx.AsyncClient) -> None:
    """Wait until the replica no longer serves the agent's card."""
    while (await replica.get(CARD)).status_code != 404:
        await asyncio.sleep(0.05)
