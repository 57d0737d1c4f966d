"""What a process holds, counted from outside the code under test.

* resident memory, from ``/proc/self/statm``;
* TCP connections to the brokers: the process's sockets (``/proc/self/fd``)
  matched by inode against the kernel's connection tables (``/proc/net/tcp``
  and ``tcp6``), established ones whose remote end is a broker's address;
* Kafka consumers: ``AIOKafkaConsumer`` objects alive in the process (found by
  the garbage collector, so no count kept by the bus is trusted);
* consumer group memberships: members of the given groups as the broker
  describes them (``DescribeGroups``).

Linux only for the first two: elsewhere they are None.
"""

from __future__ import annotations

import gc
import ipaddress
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.admin import (
    DescribeGroupsRequest_v0,
    DescribeGroupsRequest_v1,
    DescribeGroupsRequest_v2,
)
from aiokafka.protocol.api import Request

Endpoint = tuple[str, int]
#: /proc/net/tcp state of an established connection.
ESTABLISHED = "01"


def rss_bytes() -> int | None:
    """Resident memory of this process, or None without /proc."""
    try:
        resident = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident * os.sysconf("SC_PAGE_SIZE")


def resolve(endpoints: Iterable[Endpoint]) -> set[Endpoint]:
    """``endpoints`` (host names allowed) as IP addresses and ports."""
    resolved = set()
    for host, port in endpoints:
        for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP):
            resolved.add((_plain(ipaddress.ip_address(info[4][0])), port))
    return resolved


def tcp_connections(endpoints: set[Endpoint], proc: Path = Path("/proc")) -> int | None:
    """Established TCP connections of this process to any of ``endpoints``
    (IP addresses, as :func:`resolve` gives them); None without /proc."""
    try:
        fds = list((proc / "self" / "fd").iterdir())
    except OSError:
        return None
    inodes = set()
    for fd in fds:
        try:
            link = os.readlink(fd)
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "self" / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            established = fields[3] == ESTABLISHED and fields[9] in inodes
            if established and kernel_address(fields[2]) in endpoints:
                count += 1
    return count


def kernel_address(hex_address: str) -> Endpoint:
    """``0100007F:2384`` (the kernel's byte order, 32-bit words) -> (``127.0.0.1``, 9092)."""
    address, port = hex_address.split(":")
    raw = bytes.fromhex(address)
    ordered = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return _plain(ipaddress.ip_address(ordered)), int(port, 16)


def _plain(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """The address as text, an IPv4 address mapped into IPv6 as IPv4."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def live_consumers() -> int:
    """``AIOKafkaConsumer`` objects alive in this process."""
    gc.collect()
    return sum(1 for obj in gc.get_objects() if isinstance(obj, AIOKafkaConsumer))


async def broker_endpoints(bootstrap: str) -> list[Endpoint]:
    """The host and port of every broker of the cluster at ``bootstrap``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        cluster = await admin.describe_cluster()
    finally:
        await admin.close()
    return [(broker["host"], int(broker["port"])) for broker in cluster["brokers"]]


class _DescribeGroups(
    Request[DescribeGroupsRequest_v0 | DescribeGroupsRequest_v1 | DescribeGroupsRequest_v2]
):
    """DescribeGroups up to v2: aiokafka 0.14 decodes a v3 answer with the v2
    schema and fails (Kafka 4 answers v3 when asked)."""

    API_KEY = 15

    def __init__(self, groups: list[str]) -> None:
        self.groups = groups

    def build(self, request_struct_class: type[Any]) -> Any:
        return request_struct_class(self.groups)


async def group_members(bootstrap: str, marker: str) -> tuple[int, int]:
    """(groups, members): the consumer groups whose names hold ``marker`` and
    their members, as the broker describes them."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await client.bootstrap()
        names = [name for name, *_ in await admin.list_consumer_groups() if marker in name]
        by_coordinator: dict[int, list[str]] = {}
        for name in names:
            by_coordinator.setdefault(await admin.find_coordinator(name), []).append(name)
        members = 0
        for coordinator, groups in by_coordinator.items():
            response = await client.send(coordinator, _DescribeGroups(groups))
            members += sum(len(group["members"]) for group in response.to_object()["groups"])
        return len(names), members
    finally:
        await client.close()
        await admin.close()
