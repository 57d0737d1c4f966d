"""The Bus: the composition root of one process's part of the bus, and its lifecycle.

One asyncio loop per process owns all I/O. Used from async code
(``async with bus:``) the bus runs on the current loop; used from sync code
(``with bus:`` or ``bus.start()``) it starts and owns a loop thread.

- :mod:`~a2a_bus.bus.root`: the :class:`Bus`, which builds the parts and wires them;
- :mod:`~a2a_bus.bus.lifecycle`: its start and stop, on a loop of the caller's or its own;
- :mod:`~a2a_bus.bus.hosts`: the agents it hosts: spawned, announced, drained at a stop;
- :mod:`~a2a_bus.bus.options`: the checks and defaults of its options;
- :mod:`~a2a_bus.bus.factories`: the transports ``Bus.memory``, ``Bus.kafka`` and
  ``Bus.from_env`` build.
"""

from a2a_bus.bus.factories import DLQ_ENV as DLQ_ENV
from a2a_bus.bus.factories import dlq_topic as dlq_topic
from a2a_bus.bus.options import DEFAULT_DRAIN_TIMEOUT as DEFAULT_DRAIN_TIMEOUT
from a2a_bus.bus.root import Bus

__all__ = ["Bus"]
