"""The in-process transport, the embedded default: see :mod:`a2a_bus.transport.memory.transport`."""

from a2a_bus.transport.memory.transport import MemoryTransport

__all__ = ["MemoryTransport"]
