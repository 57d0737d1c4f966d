"""What a process holds, counted from /proc: memory and TCP connections."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from a2a_bus.bench import census


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    yield server
    server.close()


def _connect(server: socket.socket) -> tuple[socket.socket, socket.socket]:
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    return client, accepted


def test_connections_to_an_endpoint_are_those_this_process_holds_open(
    listener: socket.socket,
) -> None:
    other = socket.create_server(("127.0.0.1", 0))
    endpoints = census.resolve([("localhost", listener.getsockname()[1])])
    assert census.tcp_connections(endpoints) == 0
    pairs = [_connect(listener) for _ in range(3)]
    elsewhere = _connect(other)  # to another port: not counted
    assert census.tcp_connections(endpoints) == 3  # the accepted ends are not to it
    for end in pairs[0]:
        end.close()
    assert census.tcp_connections(endpoints) == 2
    for end in [*pairs[1], *pairs[2], *elsewhere, other]:
        end.close()


def test_kernel_addresses_read_as_ip_and_port() -> None:
    assert census.kernel_address("0100007F:2384") == ("127.0.0.1", 9092)
    # An IPv4 address mapped into IPv6 (a dual-stack socket) reads as IPv4.
    assert census.kernel_address("0000000000000000FFFF00000100007F:2384") == ("127.0.0.1", 9092)
    assert census.kernel_address("00000000000000000000000001000000:0050") == ("::1", 80)


def test_rss_grows_with_memory_in_use() -> None:
    before = census.rss_bytes()
    assert before is not None and before > 0
    held = bytes(64 * 1024 * 1024) + b"x"  # written, so resident
    after = census.rss_bytes()
    assert after is not None and after - before >= 32 * 1024 * 1024
    del held
