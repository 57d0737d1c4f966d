"""Errors a transport raises: they speak of records, never of JSON-RPC (the core
maps them to JSON-RPC errors, :func:`a2a_bus.core.errors.transport_refusal`)."""

from __future__ import annotations


class TransportError(Exception):
    """A transport could not move a record."""


class RecordTooLarge(TransportError):
    """A record over the size the transport (or its broker) takes."""


class NotDelivered(TransportError):
    """A record the transport could not write within its delivery timeout (the
    broker was away)."""
