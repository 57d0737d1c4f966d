"""``/healthz`` and ``/readyz``: an agent that failed to start, a stopped bus, and on
Kafka a broker lost after the start (a broker of this test's own, killed with
SIGKILL and started again on its data)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from a2a_bus import Agent, Bus, RestartPolicy, method
from a2a_bus.gateway import GatewaySettings, create_app
from tests.buses import eventually
from tests.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
WAIT = 20.0  # seconds; a guard against hangs, never a performance limit
#: A broker's start, the kill seen, the restart seen: each bounded by this.
BROKER_WAIT = 120.0
GIVES_UP = RestartPolicy(backoff_initial=0.005, backoff_max=0.02, max_failed_starts=3)


class NoDatabase(Agent):
    agent_id = "no-database"

    def on_start(self) -> None:
        raise ConnectionError("database down")

    @method
    def ping(self) -> str:
        return "pong"


class Fine(Agent):
    agent_id = "fine"

    @method
    def ping(self) -> str:
        return "pong"


@pytest.fixture
async def failing_bus() -> AsyncIterator[Bus]:
    bus = Bus.memory(restart_policy=GIVES_UP)
    bus.spawn(Fine)
    bus.spawn(NoDatabase)
    async with bus:
        yield bus


def http_of(bus: Bus) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(bus, GatewaySettings(request_timeout=WAIT)))
    return httpx.AsyncClient(transport=transport, base_url="http://gateway")


async def test_readyz_names_an_agent_that_failed_to_start(failing_bus: Bus) -> None:
    async with http_of(failing_bus) as http:
        await eventually(lambda: bool(failing_bus.directory.failed_here()), "the agent to fail")
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        failure = (
            "failed to start 3 times in a row; last: ConnectionError in on_start: database down"
        )
        assert ready.json() == {
            "status": "not ready",
            "reason": "failed agents: no-database",
            "failed": {"no-database": failure},
        }
        assert (await http.get("/healthz")).status_code == 200  # the process still answers
        card = (await http.get("/agents/no-database")).json()
        assert (card["status"], card["failure"]) == ("failed", failure)
        assert (await http.get("/agents/fine")).json()["status"] == "running"
        answer = await http.post(
            "/rpc",
            json={
                "jsonrpc": "2.0",
                "method": "ping",
                "params": {"_agentId": "no-database"},
                "id": 7,
            },
        )
        assert answer.json()["error"]["code"] == -32002


async def test_readyz_is_503_once_the_bus_stopped() -> None:
    bus = Bus.memory()
    bus.spawn(Fine)
    async with http_of(bus) as http:
        async with bus:
            assert (await http.get("/readyz")).json() == {"status": "ready"}
        ready = await http.get("/readyz")
        assert (ready.status_code, ready.json()["reason"]) == (503, "the bus is not running")
        # A request that comes too late is told so, not answered with an internal error.
        late = await http.post("/rpc", json={"jsonrpc": "2.0", "method": "ping", "id": 1})
        assert (late.status_code, late.json()) == (503, {"error": "the bus is not running"})


# -- a broker lost after the start ------------------------------------------------------


class OwnBroker:
    """A Kafka broker of this test alone (``scripts/kafka.sh`` on free ports), which it
    may kill: never the shared one."""

    def __init__(self, state: Path, port: int, controller_port: int) -> None:
        self.bootstrap = f"127.0.0.1:{port}"
        self.env = {
            **os.environ,
            "KAFKA_PORT": str(port),
            "KAFKA_CONTROLLER_PORT": str(controller_port),
            "A2A_STATE_DIR": str(state),
            "KAFKA_KEEP_DATA": "1",  # a restart finds its topics and offsets
        }
        self.pid_file = state / str(port) / "kafka.pid"

    def _script(self, command: str) -> None:
        done = subprocess.run(
            [str(ROOT / "scripts" / "kafka.sh"), command],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=BROKER_WAIT,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]

    def start(self) -> None:
        self._script("start")

    def kill(self) -> None:
        """SIGKILL: no goodbye to its clients, as when its machine dies."""
        pid = int(self.pid_file.read_text())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + BROKER_WAIT
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # reaped by init (the script started it under setsid)

    def stop(self) -> None:
        self._script("stop")


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[OwnBroker]:
    if not shutil.which("java"):
        message = "a broker of the test's own needs java (scripts/kafka.sh)"
        if os.environ.get("A2A_REQUIRE_KAFKA") == "1":
            pytest.fail(message)
        pytest.skip(message)
    broker = OwnBroker(tmp_path, *free_ports(2))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


async def eventually_status(http: httpx.AsyncClient, status: int) -> dict[str, object]:
    """Poll /readyz until it answers ``status``; its body then."""

    async def poll() -> dict[str, object]:
        while True:
            response = await http.get("/readyz")
            if response.status_code == status:
                body: dict[str, object] = response.json()
                return body
            await asyncio.sleep(0.2)

    return await asyncio.wait_for(poll(), BROKER_WAIT)


@pytest.mark.slow
@pytest.mark.kafka
async def test_readyz_sees_the_broker_lost_after_the_start_and_back(own_broker: OwnBroker) -> None:
    bus = Bus.kafka(own_broker.bootstrap, bus_options={"prefix": f"t{uuid.uuid4().hex[:8]}"})
    bus.spawn(Fine)
    async with bus, http_of(bus) as http:
        assert await eventually_status(http, 200) == {"status": "ready"}
        own_broker.kill()
        lost = await eventually_status(http, 503)
        assert str(lost["reason"]).startswith(f"cannot reach Kafka at {own_broker.bootstrap}: ")
        assert bus.transport.connection_problem == lost["reason"]
        own_broker.start()
        assert await eventually_status(http, 200) == {"status": "ready"}
        assert bus.transport.connection_problem is None
        ping = {"jsonrpc": "2.0", "method": "ping", "params": {"_agentId": "fine"}, "id": 1}
        answer = await http.post("/rpc", json=ping)
        assert answer.json() == {"jsonrpc": "2.0", "result": "pong", "id": 1}
