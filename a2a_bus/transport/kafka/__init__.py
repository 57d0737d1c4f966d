"""The Kafka transport (aiokafka): see :mod:`a2a_bus.transport.kafka.transport`."""

from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.groups import InboxConflict
from a2a_bus.transport.kafka.transport import KafkaTransport

__all__ = ["InboxConflict", "KafkaSettings", "KafkaTransport"]
