"""Which URLs the gateway may call out to (push-notification webhooks).

A client names the URL; the gateway POSTs to it. Without a policy, any client could
make the gateway reach what only the gateway can reach: its own loopback, the
private network, a cloud metadata service (169.254.169.254). So a URL must be
``http`` or ``https`` and every address its host resolves to must be public
unicast, unless the operator allows it: an :class:`AllowList` of host names (the
URL's host as written, e.g. ``localhost`` or ``hooks.internal``) and addresses or
networks (``127.0.0.1``, ``10.0.0.0/8``, ``::1/128``).

:func:`refusal` and :meth:`AllowList.parse` are pure; :func:`check_url` resolves the
host with an injectable resolver (the event loop's by default) and is meant to be
called when a URL is registered and again before each request (DNS can change).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: host, port -> the addresses the host resolves to (raises OSError when it cannot).
Resolver = Callable[[str, int], Awaitable[list[str]]]

SCHEMES = ("http", "https")


class RefusedURL(ValueError):
    """A URL the gateway will not call; the message says why."""


class Unresolvable(RefusedURL):
    """A URL whose host cannot be resolved now (which may pass later)."""


@dataclass(frozen=True)
class Target:
    """What a URL names: scheme, host (lower-case, IPv6 without brackets) and port;
    once checked, the addresses the host resolved to (none for a host allowed by name)."""

    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class AllowList:
    """Hosts and networks the gateway may call although they are not public."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: str | Iterable[str]) -> AllowList:
        """Entries separated by commas or whitespace: host names, addresses, CIDRs.

        Raises ValueError naming an entry that is neither.
        """
        items = split_entries(entries) if isinstance(entries, str) else entries
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in items:
            entry = raw.strip()
            if not entry:
                continue
            if "/" in entry or _is_address(entry):
                try:
                    networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                except ValueError:
                    message = f"push allow-list: {entry!r} is not an address or network"
                    raise ValueError(message) from None
                continue
            if not _is_host_name(entry):
                raise ValueError(f"push allow-list: {entry!r} is not a host name or network")
            hosts.add(entry.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def __bool__(self) -> bool:
        return bool(self.hosts or self.networks)

    def allows_host(self, host: str) -> bool:
        return host in self.hosts

    def allows_address(self, address: IPAddress) -> bool:
        return any(address in network for network in self.networks)


def split_entries(text: str) -> tuple[str, ...]:
    """The entries of an allow-list written as one string (commas or whitespace)."""
    return tuple(text.replace(",", " ").split())


def target(url: str) -> Target:
    """The scheme, host and port of a URL the gateway could POST to; RefusedURL if none."""
    if not isinstance(url, str) or not url:
        raise RefusedURL("the URL is empty")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise RefusedURL(f"the URL {url!r} cannot be parsed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        shown = f"the scheme {scheme!r}" if scheme else "no scheme"
        raise RefusedURL(f"the URL {url!r} has {shown}; only http and https URLs are called")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise RefusedURL(f"the URL {url!r} has no host")
    if not _is_address(host) and not _is_host_name(host):
        raise RefusedURL(f"the URL's host {host!r} is not a valid host name")
    if parts.username is not None or parts.password is not None:
        # Credentials belong in the config's authentication, not in a logged URL.
        raise RefusedURL(f"the URL of host {host!r} carries a user name or password")
    return Target(scheme, host, port if port is not None else (443 if scheme == "https" else 80))


def refusal(address: str, allow: AllowList) -> str | None:
    """Why the gateway must not call ``address`` (None: it may).

    An IPv6 address that carries an IPv4 one (IPv4-mapped, 6to4) is judged as
    the IPv4 address inside it.
    """
    try:
        ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    mapped = None
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped or ip.sixtofour
    if mapped is not None:
        ip = mapped
    if allow.allows_address(ip):
        return None
    kind = _kind(ip)
    if kind is None:
        return None
    return f"{ip} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} address"


def _kind(ip: IPAddress) -> str | None:
    """The kind of non-public address ``ip`` is, or None for a public unicast one."""
    for kind, flag in (
        ("loopback", ip.is_loopback),
        ("unspecified", ip.is_unspecified),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),  # before private: Python counts 240.0.0.0/4 as both
        ("private", ip.is_private),
    ):
        if flag:
            return kind
    # E.g. the shared address space 100.64.0.0/10 (carrier-grade NAT): not private,
    # not reserved, and not reachable from the internet either.
    return None if ip.is_global else "non-public"


async def resolve(host: str, port: int) -> list[str]:
    """The addresses of ``host``, from the event loop's resolver (not blocking the loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


async def check_url(url: str, allow: AllowList, resolver: Resolver = resolve) -> Target:
    """The target of ``url`` if the gateway may call it; RefusedURL saying why not.

    A host on the allow-list is called whatever it resolves to; otherwise every
    address it resolves to must be public or inside an allowed network (one bad
    address is enough to refuse: the client could pick which one is used). The
    target holds the addresses checked, so the caller can connect to one of them
    rather than resolve again (the answer could differ: DNS rebinding).
    """
    found = target(url)
    if allow.allows_host(found.host):
        return found
    if _is_address(found.host):
        addresses = [found.host]
    else:
        try:
            addresses = await resolver(found.host, found.port)
        except OSError as exc:
            raise Unresolvable(f"the host {found.host!r} cannot be resolved: {exc}") from None
        except UnicodeError as exc:  # a name the resolver cannot encode (IDNA): never valid
            raise RefusedURL(f"the host {found.host!r} is not a valid host name: {exc}") from None
        if not addresses:
            raise Unresolvable(f"the host {found.host!r} resolves to no address")
    for address in addresses:
        reason = refusal(address, allow)
        if reason is not None:
            via = "" if address == found.host else f"{found.host!r} resolves to {address}: "
            raise RefusedURL(
                f"{via}{reason}; calls to it are refused unless the gateway's push "
                "allow-list (A2A_GATEWAY_PUSH_ALLOW) names the host or its network"
            )
    return replace(found, addresses=tuple(addresses))


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _is_host_name(text: str) -> bool:
    labels = text.rstrip(".").split(".")
    return all(
        0 < len(label) <= 63 and label.replace("-", "").replace("_", "").isalnum()
        for label in labels
    )
