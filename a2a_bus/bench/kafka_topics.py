"""The topics and consumer groups a Kafka benchmark's run made, deleted when it ends.

Every run makes new topics and groups, named with its run id, so that runs never
see each other's records; left behind, thousands of them slow a long-lived broker
down.
"""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.admin import DeleteGroupsRequest


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
