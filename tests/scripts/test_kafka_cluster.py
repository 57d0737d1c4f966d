"""``scripts/kafka.sh cluster stop``: every node of a 3-node cluster exits on its
SIGTERM (stopped one after the other, the last ones lost their quorum of controllers
and waited 30 s for a SIGKILL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.transport.kafka.own_kafka import OwnKafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.cluster, pytest.mark.timeout(300)]


def test_a_cluster_stops_with_every_node_exiting_on_its_sigterm(tmp_path: Path) -> None:
    kafka = OwnKafka(tmp_path, nodes=3)
    try:
        kafka.start()
        pids = [kafka.pid(node) for node in (1, 2, 3)]
    finally:
        said = kafka.stop()
    assert "SIGKILL" not in said, said
    assert said.count("stopped (pid") == 3, said
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
