"""Transports: in-memory (embedded default) and Kafka."""

from a2a_bus.transport.base import Delivery, Handler, Subscription, TopicPattern, Transport

__all__ = ["Delivery", "Handler", "Subscription", "TopicPattern", "Transport"]
