"""deploy/docker-compose.yml works: each a2a-bus service's command runs as a local
process against the test broker (no container engine runs here), then an agent is
called through the gateway.

The compose file is read, not copied: its service names map to loopback (``kafka:9092``
to the test broker, the gateway's ``0.0.0.0:8080`` to a free port on 127.0.0.1), each
service runs ``deploy.replicas`` processes (the workers of one agent share one host
here), with its ``environment`` and a topic prefix of this test's own. The image's
entrypoint (deploy/Dockerfile) is ``a2a-bus``: here ``python -m a2a_bus``.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.ports import free_ports

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
WAIT = 90.0  # seconds; a guard against hangs on a loaded machine, never a performance limit


def a2a_bus_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run the a2a-bus image (the others, Kafka, the test provides)."""
    return {
        name: service
        for name, service in compose["services"].items()
        if service.get("image") == "a2a-bus:local"
    }


def local_args(command: list[str], names: dict[str, str]) -> list[str]:
    """``command`` with ``service:port`` addresses mapped to loopback ones."""
    return [names.get(arg, arg) for arg in command]


class Service:
    """One process of a compose service; its stdout lines arrive on a queue."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [sys.executable, "-m", "a2a_bus", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=ROOT,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.decode())

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            if text in line:
                return line
        assert self.process.stderr is not None
        stderr = self.process.stderr.read().decode() if self.process.poll() is not None else ""
        pytest.fail(f"{self.name}: no line with {text!r} (exit {self.process.poll()}): {stderr}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise


@pytest.fixture
def topology(kafka_bootstrap: str) -> Iterator[tuple[str, dict[str, Any], list[Service]]]:
    """Every a2a-bus service of the compose file running: (gateway URL, the gateway's
    service, the processes)."""
    compose = yaml.safe_load(COMPOSE.read_text())
    assert 'ENTRYPOINT ["a2a-bus"]' in DOCKERFILE.read_text()
    gateway_port = free_ports(1)[0]
    names = {"kafka:9092": kafka_bootstrap, "0.0.0.0:8080": f"127.0.0.1:{gateway_port}"}
    base = {k: v for k, v in os.environ.items() if "KAFKA_" not in k and not k.startswith("A2A_")}
    prefix = f"compose{uuid.uuid4().hex[:8]}"
    services: list[Service] = []
    try:
        for name, service in a2a_bus_services(compose).items():
            env = {**base, **{k: str(v) for k, v in (service.get("environment") or {}).items()}}
            env["A2A_PREFIX"] = prefix
            args = local_args(service["command"], names)
            for number in range(service.get("deploy", {}).get("replicas", 1)):
                services.append(Service(f"{name}#{number}", args, env))
        for service in services:
            service.wait_for("a2a-bus: Kafka ingress on topic")  # the banner's last line
        gateway = a2a_bus_services(compose)["gateway"]
        yield f"http://127.0.0.1:{gateway_port}", gateway, services
    finally:
        codes = {service.name: service.stop() for service in services}
    assert codes == {service.name: 0 for service in services}


def until_answered(http: httpx.Client, path: str, check: Any) -> Any:
    """GET ``path`` until ``check(response)`` holds; its JSON then."""
    deadline = time.monotonic() + WAIT
    while True:
        response = http.get(path)
        if check(response):
            return response.json()
        assert time.monotonic() < deadline, f"{path}: {response.status_code} {response.text}"
        time.sleep(0.2)


def test_the_compose_services_call_an_agent_through_the_gateway(
    topology: tuple[str, dict[str, Any], list[Service]],
) -> None:
    url, gateway, services = topology
    # Two calculator workers and the echo worker on one host; the gateway hosts nothing.
    assert sorted(s.name for s in services) == [
        "calculator#0",
        "calculator#1",
        "echo#0",
        "gateway#0",
    ]
    with httpx.Client(base_url=url, timeout=WAIT) as http:
        ready = until_answered(http, "/readyz", lambda r: r.status_code == 200)
        assert ready == {"status": "ready"}
        listed = until_answered(
            http, "/agents", lambda r: {c["id"] for c in r.json()["agents"]} >= {"calc", "echo"}
        )
        assert {card["status"] for card in listed["agents"]} == {"running"}
        for id in range(1, 21):  # more calls than workers: whichever takes them answers
            call = {"jsonrpc": "2.0", "method": "subtract", "params": [42, id], "id": id}
            assert http.post("/rpc", json=call).json() == {
                "jsonrpc": "2.0",
                "result": 42 - id,
                "id": id,
            }
        echo = {"jsonrpc": "2.0", "method": "shout", "params": {"_agentId": "echo", "text": "hi"}}
        assert http.post("/rpc", json={**echo, "id": "e"}).json()["result"] == "HI"
    # The gateway's healthcheck command, pointed at the same place, passes.
    check = gateway["healthcheck"]["test"]
    assert check[0] == "CMD"
    probe = [arg.replace("127.0.0.1:8080", url.removeprefix("http://")) for arg in check[1:]]
    assert probe[0] == "python"
    done = subprocess.run([sys.executable, *probe[1:]], timeout=WAIT, check=False)
    assert done.returncode == 0
