"""Processes of the multi-process task tests: ``a2a-bus serve`` as gateways (HTTP,
no agents) and as workers (agents, no HTTP), on one topic prefix of a real broker.

Each process is a real OS process the test may ``kill -9``; its stdout lines are
read in a thread (to see it ready), its stderr goes to a file shown when it fails
to start.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from tests.ports import free_ports

from .task_agents import LOG_ENV

ROOT = Path(__file__).resolve().parents[3]
AGENTS = Path(__file__).with_name("task_agents.py")
#: Seconds a process gets to start or stop; a guard against hangs, not a limit.
START = 60.0


class Served:
    """One ``a2a-bus serve`` process."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], errors: Path) -> None:
        self.name = name
        self.errors = errors
        with errors.open("ab") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "a2a_bus", "serve", *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=ROOT,
            )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.decode(errors="replace"))

    def wait_for(self, text: str) -> None:
        """Wait for a line of stdout holding ``text``; AssertionError (with the
        process's stderr) when it exits or takes too long."""
        deadline = time.monotonic() + START
        while time.monotonic() < deadline:
            try:
                if text in self._lines.get(timeout=0.1):
                    return
            except queue.Empty:
                if not self.alive:
                    break
        self.kill()
        tail = self.errors.read_text(errors="replace")[-3000:]
        raise AssertionError(f"{self.name} did not print {text!r}:\n{tail}")

    def kill(self) -> None:
        """SIGKILL: no drain, no commit, no goodbye."""
        if self.alive:
            self.process.kill()
        self.process.wait(START)

    def stop(self) -> None:
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(START)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(START)
        if self.process.stdout is not None:
            self.process.stdout.close()


class Cluster:
    """Gateways and workers of one bus (a topic prefix) on a real broker."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str,
        directory: Path,
        token: str,
        settings: dict[str, str],
    ) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.directory = directory
        self.token = token
        self.log = directory / "handled.jsonl"
        self.log.touch()
        tokens = directory / "tokens.json"
        tokens.write_text(f'{{"{token}": {{}}}}')
        self._tokens = tokens
        self._settings = settings
        self.gateways: dict[str, Served] = {}
        self.ports: dict[str, int] = {}
        self.workers: list[Served] = []

    def _env(self) -> dict[str, str]:
        """The environment of a process: none of the test run's bus or gateway
        settings, the worktree's code, the log file, then ``settings``."""
        env = {
            k: v
            for k, v in os.environ.items()
            if "KAFKA_" not in k and not k.startswith(("A2A_GATEWAY", "A2A_PREFIX", "A2A_NODE"))
        }
        env["PYTHONPATH"] = str(ROOT)
        env[LOG_ENV] = str(self.log)
        env.update(self._settings)
        return env

    def _common(self) -> list[str]:
        return ["--kafka", self.bootstrap, "--prefix", self.prefix]

    def worker(self, *classes: str, replicas: int = 1) -> Served:
        """Start a process hosting ``replicas`` actors of each of ``classes`` of
        ``task_agents`` (ready when returned)."""
        name = f"worker-{len(self.workers)}"
        args = [*self._common(), "--replicas", str(replicas), *(f"{AGENTS}:{c}" for c in classes)]
        served = Served(name, args, self._env(), self._errors(name))
        served.wait_for("worker: no HTTP gateway")
        self.workers.append(served)
        return served

    def gateway(self, name: str, agents: tuple[str, ...]) -> str:
        """The base URL of gateway ``name``, started (on its former port) when it
        is not running, once it knows ``agents``."""
        running = self.gateways.get(name)
        port = self.ports.setdefault(name, free_ports(1)[0])
        base = f"http://127.0.0.1:{port}"
        if running is None or not running.alive:
            if running is not None:
                running.stop()
            args = [*self._common(), "--http", f"127.0.0.1:{port}", "--tokens", str(self._tokens)]
            # A source of its own: the agent's (source, id) de-duplication does not
            # hide a request two replicas both sent.
            env = {**self._env(), "A2A_GATEWAY_SOURCE": f"a2a-bus-gateway-{name}"}
            served = Served(f"gateway-{name}", args, env, self._errors(f"gateway-{name}"))
            self.gateways[name] = served
            served.wait_for("listening on")
        self.wait_for_agents(base, agents)
        return base

    def wait_for_agents(self, base: str, agents: tuple[str, ...]) -> None:
        """Wait until the gateway at ``base`` serves the cards of ``agents``."""
        headers = {"Authorization": f"Bearer {self.token}"}
        deadline = time.monotonic() + START
        for agent in agents:
            url = f"{base}/a2a/{agent}/.well-known/agent-card.json"
            while httpx.get(url, headers=headers).status_code != 200:
                assert time.monotonic() < deadline, f"{base} never saw the agent {agent!r}"
                time.sleep(0.1)

    def kill_gateway(self, name: str) -> None:
        self.gateways[name].kill()

    def _errors(self, name: str) -> Path:
        return self.directory / f"{name}.err"

    def stop(self) -> None:
        for served in [*self.gateways.values(), *self.workers]:
            served.stop()
