"""The ports the tests start brokers on: free, consecutive, and below the range the
kernel gives outgoing connections (where a client could connect to itself)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.ports import LOWEST, ephemeral_start, free_port_run, free_ports


def test_a_run_of_free_ports_lies_below_the_outgoing_connections_range() -> None:
    start = ephemeral_start()
    for count in (1, 2, 6):
        base = free_port_run(count)
        assert base >= LOWEST and base + count <= start
        for port in range(base, base + count):  # free: each can be bound now
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))
    ports = free_ports(3)
    assert ports == list(range(ports[0], ports[0] + 3)) and ports[-1] < start


def test_the_range_is_read_from_the_kernel_or_linux_s_default(tmp_path: Path) -> None:
    narrowed = tmp_path / "ip_local_port_range"
    narrowed.write_text("40000\t60999\n")
    assert ephemeral_start(narrowed) == 40000
    assert ephemeral_start(tmp_path / "missing") == 32768
    narrowed.write_text("garbage\n")
    assert ephemeral_start(narrowed) == 32768
