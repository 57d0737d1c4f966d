"""The consumer groups of agent inboxes: one per set of agents (a composition).

One consumer serves all the inbox topics of a process, in the group
``<prefix>.<digest>``, the digest a short stable hash of the sorted topic
names: processes that host the same agents are members of one group and share
its partitions, so each request is handled by one of them. A process whose
agents change joins another group. Before it joins, it surveys the other
groups named ``<prefix>.*``, and the groups named after one of its inbox topics
(one group per inbox: how inboxes were consumed before, and how a transport
without a shared inbox consumer still consumes them):

* one whose members consume one of its topics right now is a *conflict*: two
  processes with different sets of agents would both handle that agent's
  requests, so the process refuses (:class:`InboxConflict`);
* their commits on its topics are the *handover*: a partition the new group has
  no (or an older) commit for starts at the newest of them, whose redelivery
  lease bounds what their members may have handed out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from aiokafka import TopicPartition

from a2a_bus.transport.kafka.broker import Broker
from a2a_bus.transport.kafka.commits import decode_lease

#: Hex digits of the composition's digest in a group name.
_DIGEST_LENGTH = 12


def composition_group(prefix: str, topics: Iterable[str]) -> str:
    """The group of the processes that consume exactly ``topics``."""
    names = "\n".join(sorted(topics)).encode()
    return f"{prefix}.{hashlib.sha256(names).hexdigest()[:_DIGEST_LENGTH]}"


def is_composition_group(prefix: str, group: str) -> bool:
    """Whether ``group`` is an inbox group of ``prefix`` (any composition)."""
    return re.fullmatch(rf"{re.escape(prefix)}\.[0-9a-f]{{{_DIGEST_LENGTH}}}", group) is not None


class InboxConflict(RuntimeError):
    """Another set of agents' group consumes an inbox topic of this process."""

    def __init__(self, topic: str, group: str, other: str) -> None:
        self.topic = topic
        self.group = group
        self.other = other
        super().__init__(
            f"inbox {topic!r} is consumed by consumer group {other!r}, whose processes host"
            f" another set of agents than this one (group {group!r}): processes that host an"
            " agent must all host the same set of agents; run other agents in processes"
            " of their own"
        )


@dataclass(frozen=True)
class Survey:
    """What the other inbox groups of a prefix mean for a composition."""

    #: Per topic of the composition that another group consumes: the refusal.
    conflicts: dict[str, InboxConflict] = field(default_factory=dict)
    #: Per partition of the composition's topics: the newest (offset, lease)
    #: another group committed (read only when there is no conflict).
    handover: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)


async def survey(broker: Broker, prefix: str, group: str, topics: frozenset[str]) -> Survey:
    """Look for conflicts with ``group`` (consuming ``topics``), else read the handover."""
    others = sorted(
        name
        for name in await broker.consumer_groups()
        if name != group and (is_composition_group(prefix, name) or name in topics)
    )
    consuming = await broker.group_topics(others)
    conflicts: dict[str, InboxConflict] = {}
    for other in others:
        for topic in sorted(consuming.get(other, set()) & topics):
            conflicts.setdefault(topic, InboxConflict(topic, group, other))
    if conflicts:
        return Survey(conflicts=conflicts)
    handover: dict[TopicPartition, tuple[int, int]] = {}
    for other in others:
        for tp, (offset, metadata) in (await broker.committed_offsets(other)).items():
            if offset < 0 or tp.topic not in topics:
                continue
            found = (offset, decode_lease(metadata) or 0)
            # The newest commit is the furthest; of equal ones the larger lease
            # (a group that took over and stopped before it handed anything out).
            if found > handover.get(tp, (-1, 0)):
                handover[tp] = found
    return Survey(handover=handover)
