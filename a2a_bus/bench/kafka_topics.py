"""The topics and consumer groups of a Kafka benchmark's run: made with the
partitions a path needs, deleted when the run ends.

Every run makes new topics and groups, named with its run id, so that runs never
see each other's records; left behind, thousands of them slow a long-lived broker
down.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.protocol.admin import DeleteGroupsRequest


async def create_run_topics(bootstrap: str, partitions: Mapping[str, int]) -> None:
    """Create each topic of ``partitions`` with its number of partitions (one
    replica), rather than leave its shape to the broker's ``num.partitions``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, n, 1) for name, n in partitions.items()])
    finally:
        await admin.close()


async def delete_run_topics(bootstrap: str, run_id: str) -> list[str]:
    """Delete the topics and consumer groups whose names hold ``run_id``; the
    topics' names.

    Every run makes new topics and groups (so runs never see each other's
    records); left behind, thousands of them slow a long-lived broker down.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        doomed = sorted(topic for topic in await admin.list_topics() if run_id in topic)
        if doomed:
            await admin.delete_topics(doomed)
        groups = [group for group, *_ in await admin.list_consumer_groups() if run_id in group]
        await delete_groups(admin, groups)
        return doomed
    finally:
        await admin.close()


async def delete_groups(admin: AIOKafkaAdminClient, groups: list[str]) -> None:
    """Delete empty consumer groups (aiokafka's admin client has no call for it)."""
    by_coordinator: dict[int, list[str]] = {}
    for group in groups:
        by_coordinator.setdefault(await admin.find_coordinator(group), []).append(group)
    for coordinator, names in by_coordinator.items():
        await admin._client.send(coordinator, DeleteGroupsRequest(names))
