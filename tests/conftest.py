"""Session fixtures shared by every test package: real Kafka and Redis servers.

Each server is found in this order, once per test session:

1. the environment: ``KAFKA_BOOTSTRAP_SERVERS`` / ``REDIS_URL`` (``scripts/test.sh`` sets them);
2. a container through testcontainers, when a Docker engine answers;
3. the local scripts ``scripts/kafka.sh`` (needs ``java`` and ``mvn``) and
   ``scripts/redis.sh`` (needs ``redis-server``, or root and ``apt-get``), started on a
   free port and stopped when the session ends;
4. otherwise the tests that need it are skipped, or fail when ``A2A_REQUIRE_KAFKA=1`` /
   ``A2A_REQUIRE_REDIS=1`` is set (CI sets both, so nothing is skipped quietly there).

Tests marked ``@pytest.mark.kafka`` or ``@pytest.mark.redis`` get the server even when
they do not ask for the fixture; tests that ask for the fixture get the mark, so
``-m "not kafka"`` deselects them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import NoReturn

import pytest

from tests.ports import free_ports

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
KAFKA_IMAGE = os.environ.get("A2A_KAFKA_IMAGE", "confluentinc/cp-kafka:7.6.0")
REDIS_IMAGE = os.environ.get("A2A_REDIS_IMAGE", "redis:7")
# The first local start downloads Kafka or installs Redis: allow for a slow network.
SCRIPT_START_TIMEOUT = 600.0

SERVICE_FIXTURES = {"kafka": "kafka_bootstrap", "redis": "redis_url"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for marker, fixture in SERVICE_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()) and not item.get_closest_marker(marker):
                item.add_marker(marker)


@pytest.fixture(autouse=True)
def _marked_services(request: pytest.FixtureRequest) -> None:
    """Start (or skip for) the servers a test's marks say it needs."""
    for marker, fixture in SERVICE_FIXTURES.items():
        if request.node.get_closest_marker(marker):
            request.getfixturevalue(fixture)


def _unavailable(flag: str, reason: str) -> NoReturn:
    """Skip the test, or fail it when the service is required (CI)."""
    if os.environ.get(flag) == "1":
        pytest.fail(f"{flag}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _docker_answers() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no SDK, no socket, no daemon: all mean "no Docker"
        return False


def _run_script(script: str, command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / script), command],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=SCRIPT_START_TIMEOUT,
        check=False,
    )


def _start_with_script(stack: ExitStack, script: str, env: dict[str, str], flag: str) -> None:
    """Run ``<script> start`` and register its ``stop``; skip/fail with its output."""
    try:
        started = _run_script(script, "start", env)
    except subprocess.TimeoutExpired:
        _run_script(script, "stop", env)
        _unavailable(flag, f"scripts/{script} start did not finish in {SCRIPT_START_TIMEOUT}s")
    if started.returncode != 0:
        tail = "\n".join(started.stderr.splitlines()[-20:])
        _unavailable(flag, f"scripts/{script} start failed:\n{tail}")
    stack.callback(_run_script, script, "stop", env)


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a real Kafka broker (see the module docstring for where from)."""
    with ExitStack() as stack:
        if servers := os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            yield servers
        elif _docker_answers():
            from testcontainers.community.kafka import KafkaContainer

            container = stack.enter_context(KafkaContainer(KAFKA_IMAGE).with_kraft())
            yield container.get_bootstrap_server()
        elif shutil.which("java") and shutil.which("mvn"):
            port, controller_port = free_ports(2)
            env = {
                "KAFKA_PORT": str(port),
                "KAFKA_CONTROLLER_PORT": str(controller_port),
                "A2A_STATE_DIR": str(tmp_path_factory.mktemp("kafka")),
            }
            _start_with_script(stack, "kafka.sh", env, "A2A_REQUIRE_KAFKA")
            yield f"127.0.0.1:{port}"
        else:
            _unavailable(
                "A2A_REQUIRE_KAFKA",
                "no Kafka: set KAFKA_BOOTSTRAP_SERVERS, run a Docker engine, "
                "or install java and mvn for scripts/kafka.sh",
            )


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``redis://`` URL of a real Redis server (same policy as ``kafka_bootstrap``)."""
    with ExitStack() as stack:
        if url := os.environ.get("REDIS_URL"):
            yield url
        elif _docker_answers():
            from testcontainers.community.redis import RedisContainer

            container = stack.enter_context(RedisContainer(REDIS_IMAGE))
            host = container.get_container_host_ip()
            yield f"redis://{host}:{container.get_exposed_port(6379)}/0"
        elif shutil.which("redis-server") or (os.geteuid() == 0 and shutil.which("apt-get")):
            [port] = free_ports(1)
            env = {"REDIS_PORT": str(port), "A2A_STATE_DIR": str(tmp_path_factory.mktemp("redis"))}
            _start_with_script(stack, "redis.sh", env, "A2A_REQUIRE_REDIS")
            yield f"redis://127.0.0.1:{port}/0"
        else:
            _unavailable(
                "A2A_REQUIRE_REDIS",
                "no Redis: set REDIS_URL, run a Docker engine, or install redis-server",
            )


@pytest.fixture
def topic_factory() -> Callable[..., str]:
    """Makes topic names no other test (or earlier run) uses."""

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    return make


@pytest.fixture
def unique_topic(topic_factory: Callable[..., str]) -> str:
    """One fresh topic name for this test."""
    return topic_factory("t")
