"""Brokers a test starts for itself with ``scripts/kafka.sh`` (never the shared one),
to kill, stop and restart them: one node, or a cluster of three.

Ports are free ones picked at start; state lives under the test's temporary
directory and is deleted by :meth:`OwnKafka.stop`, which the fixtures call even
when the test fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.ports import free_port_run

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "kafka.sh"
#: Seconds a start may take (the first one downloads Kafka); a guard, not a limit.
START_TIMEOUT = 600


class OwnKafka:
    """``nodes`` brokers (1: a single node; more: a KRaft cluster of combined
    broker + controller nodes), each restartable on its own data."""

    def __init__(self, state_dir: Path, nodes: int = 1) -> None:
        self.nodes = nodes
        self.base = free_port_run(2 * nodes)
        self.env = {
            **os.environ,
            "KAFKA_PORT": str(self.base),
            "A2A_STATE_DIR": str(state_dir),
            "KAFKA_CLUSTER_SIZE": str(nodes),
            "KAFKA_HEAP": "-Xms128m -Xmx512m",
            "KAFKA_START_TIMEOUT": "180",
        }
        self.state_dir = state_dir

    def port(self, node: int) -> int:
        """The client port of node ``node`` (1-based)."""
        return self.base + 2 * (node - 1)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port(n)}" for n in range(1, self.nodes + 1))

    def _script(self, command: str, *, check: bool = True) -> str:
        """``kafka.sh COMMAND`` for the node, or ``kafka.sh cluster COMMAND``; what
        it said on stderr."""
        args = [command] if self.nodes == 1 else ["cluster", command]
        # A single node restarts on its data too (a cluster's nodes always do).
        env = {**self.env, "KAFKA_KEEP_DATA": "1"} if command == "start" else self.env
        done = subprocess.run(
            [str(SCRIPT), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"kafka.sh {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done.stderr

    def start(self) -> None:
        """Start every node that does not run, on its data if it has some."""
        self._script("start")

    def pid(self, node: int = 1) -> int:
        """The pid of the node's broker; ProcessLookupError if it does not run (a
        recycled pid is never taken for it)."""
        folder = self.state_dir / str(self.port(node))
        pid = int((folder / "kafka.pid").read_text())
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            raise ProcessLookupError(pid) from None
        if str(folder / "server.properties").encode() not in cmdline:
            raise ProcessLookupError(pid)
        return pid

    def signal(self, node: int, signum: int) -> None:
        os.kill(self.pid(node), signum)

    def kill(self, node: int = 1) -> None:
        """SIGKILL: no flush, no controlled shutdown."""
        self.signal(node, signal.SIGKILL)

    def stop(self) -> str:
        """Stop every node (a stopped one is woken first) and delete the data; what
        the script said."""
        for node in range(1, self.nodes + 1):
            with contextlib.suppress(OSError, ValueError):
                self.signal(node, signal.SIGCONT)
        return self._script("stop", check=False)


@contextlib.contextmanager
def running_kafka(state_dir: Path, nodes: int = 1) -> Iterator[OwnKafka]:
    """An :class:`OwnKafka` started for the block and stopped (its data deleted) after."""
    kafka = OwnKafka(state_dir, nodes)
    try:
        kafka.start()
        yield kafka
    finally:
        kafka.stop()
