"""A benchmark run's topics and consumer groups are deleted when it ends, and
nothing else on the broker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from a2a_bus.bench.kafka_topics import delete_run_topics
from a2a_bus.transport.kafka.transport import KafkaTransport
from tests.transport.kafka.support import Recorder

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


@pytest.fixture
def uid() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
async def transport(kafka_bootstrap: str, uid: str) -> AsyncIterator[KafkaTransport]:
    async with KafkaTransport(kafka_bootstrap, dlq_topic=f"test.dlq.{uid}") as kafka:
        assert isinstance(kafka, KafkaTransport)
        yield kafka


async def test_a_run_s_topics_and_groups_are_deleted_and_no_others(
    transport: KafkaTransport, kafka_bootstrap: str, uid: str
) -> None:
    run_id = f"run{uid}"
    ours = [f"bench.raw.req.{run_id}", f"bench{run_id}.agent.echo"]
    other = f"kept.{uid}"
    await transport.ensure_topics([*ours, other])
    groups = {f"bench{run_id}.agent.echo": ours[1], f"kept-group.{uid}": other}
    for group, topic in groups.items():  # a member joins, commits, and leaves
        subscription = await transport.subscribe([topic], group, Recorder())
        await subscription.stop()

    async def group_names() -> set[str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            return {name for name, *_ in await admin.list_consumer_groups()}
        finally:
            await admin.close()

    assert set(groups) <= await group_names()
    assert await delete_run_topics(kafka_bootstrap, run_id) == sorted(ours)
    left_groups = await group_names()
    assert f"bench{run_id}.agent.echo" not in left_groups
    assert f"kept-group.{uid}" in left_groups
    for _ in range(50):  # deletion completes in the background on the broker
        left = set(await transport.list_topics())
        if not left & set(ours):
            break
        await asyncio.sleep(0.1)
    assert not left & set(ours)
    assert other in left
