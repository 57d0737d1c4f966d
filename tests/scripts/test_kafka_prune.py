"""``scripts/kafka.sh prune`` on a broker of its own: topics whose files have not
changed for the given minutes are deleted, the others are kept."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.conftest import SCRIPTS, _run_script, _start_with_script
from tests.ports import free_ports

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


async def _admin(bootstrap: str) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    return admin


async def _create(bootstrap: str, topics: list[str]) -> None:
    admin = await _admin(bootstrap)
    try:
        await admin.create_topics([NewTopic(topic, 2, 1) for topic in topics])
    finally:
        await admin.close()


async def _topics(bootstrap: str) -> set[str]:
    admin = await _admin(bootstrap)
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


def _partition_dirs(data: Path, topic: str) -> list[Path]:
    return [path for path in data.iterdir() if path.name.rsplit("-", 1)[0] == topic]


def _made(partitions: list[Path]) -> bool:
    """Both partitions of a topic are on disk with the files the broker writes last
    (aged before then, a later write would make the topic look active)."""
    return len(partitions) == 2 and all(
        (path / "partition.metadata").exists() and (path / "leader-epoch-checkpoint").exists()
        for path in partitions
    )


def _age(paths: list[Path], seconds: float) -> None:
    then = time.time() - seconds
    for path in paths:
        for item in [path, *path.iterdir()]:
            os.utime(item, (then, then))


def test_prune_deletes_only_topics_idle_for_the_given_minutes(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # kafka_bootstrap: the suite's broker policy (java and the jars, or a failure in CI).
    port, controller_port = free_ports(2)
    env = {
        "KAFKA_PORT": str(port),
        "KAFKA_CONTROLLER_PORT": str(controller_port),
        "A2A_STATE_DIR": str(tmp_path),
    }
    bootstrap = f"127.0.0.1:{port}"
    data = tmp_path / str(port) / "data"
    with ExitStack() as stack:
        _start_with_script(stack, "kafka.sh", env, "A2A_REQUIRE_KAFKA")
        asyncio.run(_create(bootstrap, ["old.one", "old.two", "fresh"]))
        for _ in range(600):  # the partition folders fill as the topics are made
            if all(_made(_partition_dirs(data, t)) for t in ("old.one", "old.two", "fresh")):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the topics' partition folders were not made within a minute")
        deleted = 0
        for _ in range(5):
            # Under load the broker may still write into an aged folder (a new leader
            # epoch): that topic is rightly active for this prune; age it again.
            _age(_partition_dirs(data, "old.one") + _partition_dirs(data, "old.two"), 2 * 3600)
            pruned = _run_script("kafka.sh", "prune", env)  # no argument: 15 minutes
            assert pruned.returncode == 0, pruned.stderr
            found = re.search(r"deleted (\d+) topics idle for 15 minutes", pruned.stderr)
            deleted += int(found.group(1)) if found else 0
            if deleted >= 2:
                break
        assert deleted == 2, pruned.stderr

        for _ in range(100):  # deletion completes in the background
            left = asyncio.run(_topics(bootstrap))
            if not {"old.one", "old.two"} & left:
                break
            time.sleep(0.2)
        assert {"old.one", "old.two"}.isdisjoint(left)
        assert "fresh" in left

        again = _run_script("kafka.sh", "prune", env)
        assert again.returncode == 0
        assert "no topic idle for 15 minutes" in again.stderr


def test_prune_refuses_a_bad_number_of_minutes(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(SCRIPTS / "kafka.sh"), "prune", "soon"],
        env={**os.environ, "A2A_STATE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "MINUTES must be a whole number, not 'soon'" in done.stderr
