"""Errors of the bus itself (not of a JSON-RPC exchange)."""

from __future__ import annotations


class StreamError(Exception):
    """A stream broke: a gap in ``seq`` that never filled, or an error chunk."""
