"""The transports :meth:`Bus.memory`, :meth:`Bus.kafka` and :meth:`Bus.from_env`
build, each with the dead-letter topic of the bus's prefix unless told another."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from a2a_bus.core.routing import Topics
from a2a_bus.runtime.env import EnvError
from a2a_bus.transport.kafka import KafkaSettings, KafkaTransport
from a2a_bus.transport.kafka.broker import check_topic_name
from a2a_bus.transport.kafka.config import ENV_PREFIX as KAFKA_ENV_PREFIX
from a2a_bus.transport.memory import MemoryTransport

#: The dead-letter topic's variable: without it each prefix has its own.
DLQ_ENV = KAFKA_ENV_PREFIX + "DLQ_TOPIC"


def memory_transport(
    bus_options: Mapping[str, Any], *, partitions: int, retention: int
) -> MemoryTransport:
    """The in-process transport of a bus made with ``bus_options``."""
    topics = Topics(bus_options.get("prefix", "a2a"))
    return MemoryTransport(
        partitions=partitions,
        retention=retention,
        dlq_topic=topics.dlq,
    )


def kafka_transport(
    bootstrap: str | None, bus_options: Mapping[str, Any], kafka_options: dict[str, Any]
) -> KafkaTransport:
    """The Kafka transport of a bus made with ``bus_options``; ``kafka_options`` are
    KafkaSettings fields (SASL/SSL too)."""
    kafka_options.setdefault("dlq_topic", Topics(bus_options.get("prefix", "a2a")).dlq)
    return KafkaTransport(bootstrap, **kafka_options)


def env_kafka_transport(env: Mapping[str, str], prefix: str) -> KafkaTransport:
    """The Kafka transport ``A2A_KAFKA_*`` in ``env`` describe, for a bus of ``prefix``."""
    settings = KafkaSettings.from_env(env, dlq_topic=dlq_topic(env, prefix))
    return KafkaTransport(settings=settings)


def dlq_topic(env: Mapping[str, str], prefix: str) -> str:
    """``A2A_KAFKA_DLQ_TOPIC`` when set (EnvError if Kafka would refuse the name),
    else the prefix's own dead-letter topic."""
    topic = env.get(DLQ_ENV, "").strip()
    if not topic:
        return Topics(prefix).dlq
    try:
        check_topic_name(topic)
    except ValueError as exc:
        raise EnvError(f"{DLQ_ENV}={env[DLQ_ENV]!r}: {exc}") from None
    return topic
