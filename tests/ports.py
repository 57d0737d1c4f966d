"""Free ports for the brokers and servers the tests start themselves.

They are picked below the range the kernel gives outgoing connections their local
ports from: a client that keeps connecting to a port nobody listens on yet (a
KRaft node to a peer still starting) can otherwise be given that very port as
its own, connect to itself, and read its own request as the answer.
"""

from __future__ import annotations

import random
import socket
from contextlib import ExitStack
from pathlib import Path

#: Where Linux keeps the range it picks outgoing connections' ports from.
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: The lowest port handed out.
LOWEST = 10_000


def ephemeral_start(source: Path = EPHEMERAL_RANGE) -> int:
    """The first port of that range (32768, Linux's default, where it cannot be read)."""
    try:
        return int(source.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive ports that are free now, all below the
    outgoing connections' range."""
    highest_base = ephemeral_start() - count
    for _ in range(200):
        base = random.randrange(LOWEST, highest_base)
        try:
            with ExitStack() as held:
                for port in range(base, base + count):
                    held.enter_context(socket.socket()).bind(("127.0.0.1", port))
        except OSError:
            continue  # one of them is taken: try elsewhere
        return base
    raise RuntimeError(f"no run of {count} free ports below {highest_base + count}")


def free_ports(count: int) -> list[int]:
    """``count`` ports that are free now, below the outgoing connections' range."""
    base = free_port_run(count)
    return list(range(base, base + count))
