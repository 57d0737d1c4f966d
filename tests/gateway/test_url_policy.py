"""The URL policy of outgoing calls: http(s) only, public addresses unless allowed,
checked against a scripted resolver and against the real resolution of localhost."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_bus.gateway import GatewaySettings
from a2a_bus.gateway.url_policy import (
    AllowList,
    RefusedURL,
    Resolver,
    Unresolvable,
    check_url,
    refusal,
    target,
)

NONE = AllowList()


def resolver(table: dict[str, list[str]]) -> Resolver:
    """A resolver answering from ``table`` (a missing host cannot be resolved)."""

    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"no such host {host!r}")
        return table[host]

    return resolve


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.com/hook", "has the scheme 'ftp'; only http and https"),
        ("example.com/hook", "has no scheme"),
        ("http:///hook", "has no host"),
        ("http://user:secret@example.com/", "carries a user name or password"),
        ("http://example.com:99999/", "cannot be parsed"),
        ("", "the URL is empty"),
        ("http://a..b/hook", "'a..b' is not a valid host name"),
        ("http://.a/hook", "is not a valid host name"),
        (f"http://{'x' * 64}.example/hook", "is not a valid host name"),
    ],
)
def test_only_http_urls_with_a_host_are_called(url: str, reason: str) -> None:
    with pytest.raises(RefusedURL, match=reason):
        target(url)


def test_the_target_of_a_url() -> None:
    assert target("HTTPS://Hooks.Example.com/a?b=1").host == "hooks.example.com"
    assert target("https://hooks.example.com/").port == 443
    assert target("http://[::1]:8080/").host == "::1"
    assert target("http://[::1]:8080/").port == 8080


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("172.16.5.4", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-public"),
        ("::ffff:127.0.0.1", "loopback"),  # judged as the IPv4 address inside
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1: judged so too
        ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
    ],
)
def test_non_public_addresses_are_refused(address: str, kind: str) -> None:
    assert refusal(address, NONE) is not None
    assert f" {kind} address" in str(refusal(address, NONE))


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"])
def test_public_addresses_are_called(address: str) -> None:
    assert refusal(address, NONE) is None


def test_the_allow_list_takes_hosts_addresses_and_networks() -> None:
    allow = AllowList.parse("localhost, 10.0.0.0/8 ::1  192.168.1.7")
    assert allow.hosts == {"localhost"}
    assert refusal("10.20.30.40", allow) is None
    assert refusal("::1", allow) is None
    assert refusal("192.168.1.7", allow) is None
    assert refusal("192.168.1.8", allow) is not None
    assert refusal("127.0.0.1", allow) is not None  # "localhost" allows the name only


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "not a host!", "300.1.1.1/8"])
def test_a_bad_allow_list_entry_is_named(entry: str) -> None:
    with pytest.raises(ValueError, match=r"push allow-list"):
        AllowList.parse([entry])


async def test_every_address_of_a_host_must_be_public() -> None:
    table = {"hooks.example": ["93.184.216.34", "10.0.0.5"], "public.example": ["93.184.216.34"]}
    with pytest.raises(RefusedURL, match=r"'hooks.example' resolves to 10.0.0.5: .* private"):
        await check_url("https://hooks.example/x", NONE, resolver(table))
    found = await check_url("https://public.example/x", NONE, resolver(table))
    assert (found.host, found.port) == ("public.example", 443)


async def test_a_host_that_cannot_be_resolved_is_refused() -> None:
    with pytest.raises(Unresolvable, match=r"'gone.example' cannot be resolved"):
        await check_url("https://gone.example/x", NONE, resolver({}))


async def test_an_address_in_the_url_is_judged_without_resolving() -> None:
    with pytest.raises(RefusedURL, match=r"10.0.0.5 is a private address"):
        await check_url("http://10.0.0.5/x", NONE, resolver({}))
    allow = AllowList.parse("10.0.0.0/24")
    await check_url("http://10.0.0.5/x", allow, resolver({}))


async def test_localhost_really_resolves_to_loopback() -> None:
    with pytest.raises(RefusedURL, match=r"'localhost' resolves to .* a loopback address"):
        await check_url("http://localhost:8080/hook", NONE)
    await check_url("http://localhost:8080/hook", AllowList.parse("localhost"))
    await check_url("http://localhost:8080/hook", AllowList.parse("127.0.0.0/8,::1/128"))


def test_the_gateway_settings_carry_the_allow_list() -> None:
    settings = GatewaySettings.from_env({"A2A_GATEWAY_PUSH_ALLOW": "127.0.0.1/32, localhost"})
    assert settings.push_allow == ("127.0.0.1/32", "localhost")
    assert GatewaySettings(push_allow="a.example b.example").push_allow == (  # type: ignore[arg-type]
        "a.example",
        "b.example",
    )
    with pytest.raises(ValueError, match=r"push allow-list: '10.0.0.0/99'"):
        GatewaySettings.from_env({"A2A_GATEWAY_PUSH_ALLOW": "10.0.0.0/99"})


@pytest.mark.parametrize("name", ["push_timeout", "push_backoff", "push_backoff_max"])
def test_push_delays_must_be_positive(name: str) -> None:
    zero: dict[str, Any] = {name: 0.0}
    with pytest.raises(ValueError, match=rf"{name} must be a positive number of seconds"):
        GatewaySettings(**zero)
    assert getattr(GatewaySettings.from_env({f"A2A_GATEWAY_{name.upper()}": "2.5"}), name) == 2.5


async def test_a_host_the_resolver_cannot_encode_is_refused_not_retried() -> None:
    """A name the IDNA codec refuses is never valid: refused (not Unresolvable, which
    is tried again), and not an error of the gateway."""

    async def encoding(host: str, port: int) -> list[str]:
        return [str(info) for info in host.encode("idna")]  # raises for this host

    with pytest.raises(RefusedURL, match="is not a valid host name") as refused:
        # 60 letters pass as a label; their IDNA (punycode) form does not fit 63
        await check_url("http://" + "ü" * 60 + ".example/", NONE, encoding)
    assert not isinstance(refused.value, Unresolvable)
