"""Signals and closed pipes as a user meets them: Ctrl-C (or SIGTERM) at any moment of
a command, or its output read by ``head -1``, ends it promptly, without a traceback."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from .test_serve_call import ROOT, WAIT, Lines, env, run

pytestmark = pytest.mark.timeout(300)

CALC = "a2a_bus.examples.calculator:Calculator"
#: Interrupted starts of ``tail`` on Kafka, spread over its first second (the bus
#: connecting, the views subscribing).
STARTS = 16


class SilentBroker:
    """A TCP server that accepts connections and never answers: a Kafka that hangs."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.connections.append(connection)

    def wait_for_a_client(self) -> None:
        deadline = time.monotonic() + WAIT
        while not self.connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.connections, "nothing connected to the broker"

    def close(self) -> None:
        self.listener.close()
        for connection in self.connections:
            connection.close()


@pytest.fixture
def silent_broker() -> Iterator[SilentBroker]:
    broker = SilentBroker()
    yield broker
    broker.close()


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "a2a_bus", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
        cwd=ROOT,
    )


def ended(process: subprocess.Popen[str]) -> tuple[int, str]:
    """Its exit code and stderr, once it ended (killed if it does not, a failure)."""
    try:
        _, stderr = process.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail("the command did not end")
    return process.returncode, stderr


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_a_signal_ends_a_start_that_kafka_never_answers(
    silent_broker: SilentBroker, command: str, signum: signal.Signals, code: int
) -> None:
    # Not after aiokafka's own request timeout (30 s and more): at once.
    process = start(command, CALC, "--kafka", silent_broker.address)
    silent_broker.wait_for_a_client()
    process.send_signal(signum)
    returncode, stderr = ended(process)
    assert returncode == code, stderr
    assert "Traceback" not in stderr and "error" not in stderr.lower(), stderr


@pytest.mark.kafka
@pytest.mark.slow
def test_ctrl_c_while_tail_starts_on_kafka_ends_it_without_a_traceback(
    kafka_bootstrap: str,
) -> None:
    # asyncio's own handler cancelled the main task in the middle of aiokafka's
    # handling of a response, which then logged InvalidStateError with a traceback.
    prefix = f"cli{uuid.uuid4().hex[:8]}"
    for attempt in range(STARTS):
        tail = Lines("tail", "orders.#", "--kafka", kafka_bootstrap, "--prefix", prefix)
        tail.wait_for("tailing")
        time.sleep(attempt / STARTS)
        code = tail.stop()
        assert tail.process.stderr is not None
        stderr = tail.process.stderr.read().decode()
        assert code == 0, (attempt, stderr)
        assert "Traceback" not in stderr and "Unexpected" not in stderr, (attempt, stderr)


@pytest.mark.kafka
def test_tail_whose_reader_went_away_stops_its_bus_cleanly(kafka_bootstrap: str) -> None:
    # `a2a-bus tail ... | head -1`: the next line cannot be written.
    prefix = f"cli{uuid.uuid4().hex[:8]}"
    kafka = ("--kafka", kafka_bootstrap, "--prefix", prefix)
    tail = start("tail", "orders.#", *kafka)
    assert tail.stdout is not None
    assert tail.stdout.readline().startswith("tailing orders.#")
    tail.stdout.close()
    deadline = time.monotonic() + WAIT
    while tail.poll() is None and time.monotonic() < deadline:  # until it prints one
        assert run("publish", "orders.eu", "{}", *kafka).returncode == 0
    code, stderr = ended(tail)
    assert code == 1  # as any command whose output was closed
    assert stderr == "", stderr


def test_serve_whose_output_is_closed_stops_cleanly() -> None:
    # `a2a-bus serve ... | head -1`: its next status line cannot be written.
    served = start("serve", CALC, "--http", "127.0.0.1:0")
    assert served.stdout is not None
    assert served.stdout.readline().startswith("a2a-bus: serving calc")
    served.stdout.close()
    served.send_signal(signal.SIGTERM)  # its stop has a line to say
    code, stderr = ended(served)
    assert code == 1  # as any command whose output was closed
    assert stderr == "", stderr


#: The console script's own steps, with a SIGINT sent while the bus's modules load.
_INTERRUPTED_LOAD = """
import os, signal, sys

class InterruptTheLoad:
    def find_spec(self, name, path=None, target=None):
        if name == "a2a_bus.bus":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptTheLoad())
sys.argv = ["a2a-bus", "agents"]
from a2a_bus.cli import main
sys.exit(main())
"""


def test_ctrl_c_while_the_command_loads_ends_it_without_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_LOAD],
        capture_output=True,
        text=True,
        env=env(),
        cwd=ROOT,
        timeout=WAIT,
        check=False,
    )
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""
