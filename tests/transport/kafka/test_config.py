"""``KafkaSettings``: read from the environment, checked, and made into client options."""

from __future__ import annotations

import ssl
from dataclasses import replace

import pytest

from a2a_bus.runtime.env import EnvError
from a2a_bus.transport.kafka.config import KafkaSettings


def test_settings_from_env() -> None:
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": "a:1",
        "A2A_KAFKA_PARTITIONS": "6",
        "A2A_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "A2A_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "A2A_KAFKA_SASL_PLAIN_USERNAME": "user",
        "A2A_KAFKA_SASL_PLAIN_PASSWORD": "secret",
        "A2A_KAFKA_SSL_CHECK_HOSTNAME": "false",
        "A2A_KAFKA_DRAIN_TIMEOUT": "2.5",
    }
    settings = KafkaSettings.from_env(env, client_id="me")
    assert settings.bootstrap_servers == "a:1"
    assert settings.partitions == 6
    assert settings.drain_timeout == 2.5
    assert settings.ssl_check_hostname is False
    assert "secret" not in repr(settings)
    kwargs = settings.client_kwargs()
    assert kwargs["security_protocol"] == "SASL_PLAINTEXT"
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kwargs["sasl_plain_password"] == "secret"
    assert kwargs["client_id"] == "me"
    assert "ssl_context" not in kwargs


def test_subscriptions_that_keep_no_progress_wait_longer_on_an_idle_fetch() -> None:
    settings = KafkaSettings()
    assert settings.fetch_wait_ms(durable=True) == settings.fetch_max_wait_ms == 100
    assert settings.fetch_wait_ms(durable=False) == settings.nondurable_fetch_max_wait_ms == 500
    tuned = KafkaSettings.from_env({"A2A_KAFKA_NONDURABLE_FETCH_MAX_WAIT_MS": "250"})
    assert tuned.fetch_wait_ms(durable=False) == 250
    assert tuned.fetch_wait_ms(durable=True) == 100


def test_settings_reject_bad_numbers() -> None:
    with pytest.raises(ValueError, match="A2A_KAFKA_PARTITIONS"):
        KafkaSettings.from_env({"A2A_KAFKA_PARTITIONS": "three"})


def test_settings_take_a_known_content_mode_only() -> None:
    assert KafkaSettings().content_mode == "structured"
    assert KafkaSettings.from_env({"A2A_KAFKA_CONTENT_MODE": "binary"}).content_mode == "binary"
    with pytest.raises(ValueError, match="content_mode"):
        KafkaSettings(content_mode="json")


def test_ssl_settings_build_a_context() -> None:
    settings = KafkaSettings(security_protocol="SSL", ssl_check_hostname=False)
    context = settings.build_ssl_context()
    assert context is not None and context.check_hostname is False
    assert isinstance(settings.client_kwargs()["ssl_context"], ssl.SSLContext)


def test_the_delivery_mode_comes_from_a2a_delivery_and_a_bad_one_is_named() -> None:
    assert not KafkaSettings.from_env({}).exactly_once
    assert KafkaSettings.from_env({"A2A_DELIVERY": "Exactly_Once"}).exactly_once
    with pytest.raises(ValueError, match="A2A_DELIVERY='twice'"):
        KafkaSettings.from_env({"A2A_DELIVERY": "twice"})
    with pytest.raises(ValueError, match="delivery must be"):
        KafkaSettings(delivery="twice")


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        # aiokafka refuses these only when the bus starts.
        ("A2A_KAFKA_COMPRESSION_TYPE", "bogus", "expected one of gzip, snappy, lz4, zstd"),
        (
            "A2A_KAFKA_SECURITY_PROTOCOL",
            "bogus",
            "expected one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
        ),
        (
            "A2A_KAFKA_SASL_MECHANISM",
            "MD5",
            "expected one of PLAIN, GSSAPI, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER",
        ),
        ("A2A_KAFKA_MAX_POLL_RECORDS", "0", "expected a whole number, at least 1"),
        ("A2A_KAFKA_DEDUP_WINDOW", "-1", "expected a whole number, at least 0"),
        # Out of range: a stalled or failing transport, not a refusal.
        ("A2A_KAFKA_SESSION_TIMEOUT_MS", "-1", "expected a whole number, at least 1"),
        ("A2A_KAFKA_JOIN_TIMEOUT", "-1", "expected a positive number of seconds"),
        ("A2A_KAFKA_JOIN_TIMEOUT", "inf", "expected a positive number of seconds"),
        ("A2A_KAFKA_DRAIN_TIMEOUT", "nan", "expected a number of seconds, 0 or more"),
        ("A2A_KAFKA_LINGER_MS", "-5", "expected a whole number, at least 0"),
        ("A2A_KAFKA_FETCH_MAX_WAIT_MS", "-1", "expected a whole number, at least 0"),
        ("A2A_KAFKA_MAX_RETRIES", "-1", "expected a whole number, at least 0"),
        ("A2A_KAFKA_COMMIT_INTERVAL_MS", "-1", "expected a whole number, at least 0"),
        ("A2A_KAFKA_DELIVERY_TIMEOUT_MS", "0", "expected a whole number, at least 1"),
        ("A2A_KAFKA_REQUEST_TIMEOUT_MS", "0", "expected a whole number, at least 1"),
        ("A2A_KAFKA_PARTITIONS", "1e3", "expected a whole number, at least 1"),
        ("A2A_KAFKA_CONTENT_MODE", "json", "expected one of structured, binary"),
        ("A2A_KAFKA_DELIVERY", "twice", "expected one of at_least_once, exactly_once"),
        ("A2A_KAFKA_SSL_CHECK_HOSTNAME", "maybe", "expected true or false"),
    ],
)
def test_a_value_kafka_cannot_use_is_refused_naming_its_variable(
    name: str, value: str, expected: str
) -> None:
    with pytest.raises(EnvError) as refused:
        KafkaSettings.from_env({name: value})
    assert str(refused.value) == f"{name}={value!r}: {expected}"


def test_choices_are_read_whatever_their_case() -> None:
    settings = KafkaSettings.from_env(
        {
            "A2A_KAFKA_CONTENT_MODE": "BINARY",
            "A2A_KAFKA_SECURITY_PROTOCOL": "sasl_plaintext",
            "A2A_KAFKA_SASL_MECHANISM": "scram-sha-256",
            "A2A_KAFKA_COMPRESSION_TYPE": "Gzip",
        }
    )
    assert settings.content_mode == "binary"
    assert settings.security_protocol == "SASL_PLAINTEXT"
    assert settings.sasl_mechanism == "SCRAM-SHA-256"
    assert settings.compression_type == "gzip"


def test_zero_is_taken_where_it_means_no_wait_and_refused_where_it_would_stall() -> None:
    names = ("LINGER_MS", "FETCH_MAX_WAIT_MS", "COMMIT_INTERVAL_MS", "MAX_RETRIES", "DEDUP_WINDOW")
    settings = KafkaSettings.from_env(
        {**{f"A2A_KAFKA_{name}": "0" for name in names}, "A2A_KAFKA_DRAIN_TIMEOUT": "0"}
    )
    assert [getattr(settings, name.lower()) for name in names] == [0] * len(names)
    assert settings.drain_timeout == 0
    for name in ("SESSION_TIMEOUT_MS", "MAX_POLL_RECORDS", "PARTITIONS", "JOIN_TIMEOUT"):
        with pytest.raises(EnvError, match=f"^A2A_KAFKA_{name}='0': "):
            KafkaSettings.from_env({f"A2A_KAFKA_{name}": "0"})


def test_an_empty_variable_keeps_the_default() -> None:
    names = ("PARTITIONS", "DRAIN_TIMEOUT", "COMPRESSION_TYPE", "SSL_CHECK_HOSTNAME", "CLIENT_ID")
    assert KafkaSettings.from_env({f"A2A_KAFKA_{name}": "" for name in names}) == KafkaSettings()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"linger_ms": -5}, "linger_ms must be a whole number >= 0, not -5"),
        ({"min_insync_replicas": -1}, "min_insync_replicas must be a whole number >= 0, not -1"),
        ({"join_timeout": -1.0}, "join_timeout must be a number of seconds >= 0, not -1.0"),
        (
            {"drain_timeout": float("nan")},
            "drain_timeout must be a number of seconds >= 0, not nan",
        ),
        ({"compression_type": "bogus"}, "compression_type must be one of 'gzip', 'snappy'"),
        ({"security_protocol": "ssl"}, "security_protocol must be one of 'PLAINTEXT', 'SSL'"),
    ],
)
def test_settings_given_in_code_are_checked_too(given: dict[str, object], expected: str) -> None:
    with pytest.raises(ValueError) as refused:
        KafkaSettings(**given)  # type: ignore[arg-type]
    assert str(refused.value).startswith(expected)


BAD_BOOTSTRAPS = ["", " ", "host:notaport", ":9092", "a b", "broker:99999", "a:0", "a:1,", "[::1"]


@pytest.mark.parametrize("servers", BAD_BOOTSTRAPS)
def test_bootstrap_servers_kafka_cannot_use_are_refused(servers: str) -> None:
    """In code (also through ``replace``, as the transport applies its options) with
    the setting's name; from the environment with the variable's."""
    expected = f"{servers!r}: expected HOST[:PORT], comma-separated"
    with pytest.raises(ValueError) as refused:
        KafkaSettings(bootstrap_servers=servers)
    assert str(refused.value) == f"bootstrap_servers={expected}"
    with pytest.raises(ValueError, match=r"^bootstrap_servers="):
        replace(KafkaSettings(), bootstrap_servers=servers)
    if servers.strip():  # an empty variable names no broker: the default stays
        for name in ("A2A_KAFKA_BOOTSTRAP_SERVERS", "KAFKA_BOOTSTRAP_SERVERS"):
            with pytest.raises(EnvError) as named:
                KafkaSettings.from_env({name: servers})
            assert str(named.value) == f"{name}={expected}"


@pytest.mark.parametrize(
    "servers",
    ["broker", "a:1,b:2", " a:1 , b ", "10.0.0.7:9093", "[::1]:9092", "::1", "kafka_0.svc:9094"],
)
def test_bootstrap_servers_of_hosts_and_ports_are_taken_as_given(servers: str) -> None:
    assert KafkaSettings(bootstrap_servers=servers).bootstrap_servers == servers
    assert KafkaSettings.from_env({"KAFKA_BOOTSTRAP_SERVERS": servers}).bootstrap_servers == servers


def test_the_prefixed_bootstrap_variable_wins_and_an_empty_one_keeps_the_fallback() -> None:
    both = {"A2A_KAFKA_BOOTSTRAP_SERVERS": "a:1", "KAFKA_BOOTSTRAP_SERVERS": "not a host"}
    assert KafkaSettings.from_env(both).bootstrap_servers == "a:1"
    empty = {"A2A_KAFKA_BOOTSTRAP_SERVERS": " ", "KAFKA_BOOTSTRAP_SERVERS": "b:2"}
    assert KafkaSettings.from_env(empty).bootstrap_servers == "b:2"
    assert KafkaSettings.from_env({"A2A_KAFKA_BOOTSTRAP_SERVERS": ""}) == KafkaSettings()
