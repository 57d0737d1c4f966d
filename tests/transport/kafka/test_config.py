"""``KafkaSettings``: read from the environment, checked, and made into client options."""

from __future__ import annotations

import ssl

import pytest

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
