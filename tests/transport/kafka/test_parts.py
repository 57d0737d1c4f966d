"""The broker-free parts of the Kafka transport: commit tracking, leases,
de-duplication, record decoding and settings."""

from __future__ import annotations

import asyncio
import random
import ssl

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from a2a_bus.protocol import Adaptor, new_event, to_kafka
from a2a_bus.transport.base import DeadLetter
from a2a_bus.transport.dead_letters import dead_letter_headers
from a2a_bus.transport.dedup import DedupWindow
from a2a_bus.transport.kafka.answers import Answer, AnswerRoutes
from a2a_bus.transport.kafka.broker import KafkaMetrics
from a2a_bus.transport.kafka.commits import PartitionTracker, decode_lease, encode_lease
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.groups import composition_group, is_composition_group
from a2a_bus.transport.kafka.inboxes import idle_fetch_wait
from a2a_bus.transport.kafka.partitioning import murmur2, pick_partition
from a2a_bus.transport.kafka.transactions import (
    TransactionalCommitter,
    transactional_producer_options,
)
from a2a_bus.transport.records import decode_record, failure_reason


def test_position_stops_at_the_first_unfinished_offset() -> None:
    tracker = PartitionTracker(10)
    for offset in (10, 11, 12, 15):  # 13, 14: compacted away or control records
        tracker.add(offset)
    assert tracker.position == 10
    tracker.finish(12)
    tracker.finish(15)
    assert tracker.position == 10  # 10 and 11 still running
    tracker.finish(10)
    assert tracker.position == 11
    tracker.finish(11)
    assert tracker.position == 16
    assert tracker.in_flight == 0


def test_a_multi_delivery_record_finishes_with_its_last_delivery() -> None:
    tracker = PartitionTracker(0)
    tracker.add(0, deliveries=3)
    tracker.finish(0)
    tracker.finish(0)
    assert tracker.position == 0
    tracker.finish(0)
    assert tracker.position == 1


def test_tracker_rejects_misuse() -> None:
    tracker = PartitionTracker(5)
    tracker.add(5)
    with pytest.raises(ValueError):
        tracker.add(5)
    with pytest.raises(ValueError):
        tracker.finish(6)
    tracker.finish(5)
    with pytest.raises(ValueError):
        tracker.add(3)


def test_dirty_follows_position_and_lease() -> None:
    tracker = PartitionTracker(0, lease=100)
    assert tracker.dirty  # nothing committed yet
    tracker.committed(0, 100)
    assert not tracker.dirty
    tracker.add(0)
    tracker.finish(0)
    assert tracker.dirty
    tracker.committed(1, 100)
    tracker.lease = 200
    assert tracker.dirty


def test_partitions_are_those_of_aiokafkas_default_partitioner() -> None:
    rng = random.Random(7)
    for length in range(40):
        for _ in range(20):
            key = rng.randbytes(length)
            assert murmur2(key) == aiokafka_murmur2(key)
            for count in (1, 3, 7):
                every = list(range(count))
                assert pick_partition(key, every, every) == DefaultPartitioner()(key, every, every)
    assert pick_partition(None, [0, 1, 2], [2]) == 2  # no key: an available one


def test_lease_is_extended_before_it_runs_out() -> None:
    tracker = PartitionTracker(0, lease=100)
    tracker.committed(0, 100)
    assert tracker.covers(49, 100)
    assert tracker.lease == 100  # more than half the lease left: nothing to ask
    assert tracker.covers(50, 100)
    assert tracker.lease == 150 and tracker.dirty  # the next commit extends it
    assert tracker.covers(60, 100)
    assert tracker.lease == 150  # asked once per acknowledged lease
    assert not tracker.covers(100, 100)  # past the acknowledged lease: wait for it
    tracker.committed(0, 150)
    assert tracker.covers(100, 100)
    assert tracker.lease == 200


@pytest.mark.parametrize(
    ("metadata", "lease"),
    [(encode_lease(42), 42), ("", None), (None, None), ("other", None), ("a2a-lease=x", None)],
)
def test_lease_metadata(metadata: str | None, lease: int | None) -> None:
    assert decode_lease(metadata) == lease


async def test_dedup_window_claims_once_and_forgets_the_oldest() -> None:
    window = DedupWindow(2)
    assert window.claim(("s", "1")) is None
    original = window.claim(("s", "1"))
    assert original is not None and not original.done()
    window.done(("s", "1"))
    assert original.done()
    assert window.claim(("s", "2")) is None
    assert window.claim(("s", "3")) is None  # evicts ("s", "1")
    assert ("s", "1") not in window
    assert window.claim(("s", "1")) is None
    assert len(window) == 2


async def test_evicting_a_running_claim_releases_its_waiters() -> None:
    window = DedupWindow(1)
    window.claim("a")
    waiter = window.claim("a")
    assert waiter is not None
    window.claim("b")
    await asyncio.wait_for(waiter, 1)


async def test_forget_lets_the_next_copy_through() -> None:
    window = DedupWindow(10)
    window.claim("a")
    window.forget("a")
    assert window.claim("a") is None


async def test_a_key_claimed_again_after_forget_keeps_a_whole_window() -> None:
    window = DedupWindow(2)
    window.claim("a")
    window.forget("a")
    window.claim("b")
    assert window.claim("a") is None  # handled again: its first place is spent
    window.claim("c")  # the oldest live key, "b", leaves; "a" stays
    assert "b" not in window
    assert window.claim("a") is not None
    window.claim("d")
    assert "a" not in window and len(window) == 2


def test_the_window_holds_at_most_its_capacity() -> None:
    window = DedupWindow(100)
    for n in range(1000):
        window.claim(("s", str(n)))
        window.done(("s", str(n)))
        if n % 7 == 0:
            window.forget(("s", str(n)))
    assert len(window) <= 100
    assert ("s", "999") in window and ("s", "899") not in window


async def test_answers_dropped_at_a_handover_mark_their_records_to_be_handled_again() -> None:
    """exactly_once: answers still waiting for their transaction when the partition
    is handed over are dropped; their records must not look handled here (if the
    partition comes back, de-duplication would skip them and commit no answer)."""
    routes = AnswerRoutes()
    committer = TransactionalCommitter(
        AIOKafkaConsumer(),  # not started: the handover touches no broker
        "group",
        {},
        settings=KafkaSettings(delivery="exactly_once"),
        routes=routes,
        metrics=KafkaMetrics(),
    )
    kept, handed = TopicPartition("in", 0), TopicPartition("in", 1)
    committer.claim([kept, handed])
    for tp, offset in ((kept, 3), (handed, 7), (handed, 8)):
        committer.outbox.add(tp, Answer(offset, "out", b"{}", None, []))
    committer.release([handed])
    assert routes.was_dropped("in", 1, 7) and routes.was_dropped("in", 1, 8)
    assert not routes.was_dropped("in", 0, 3)
    assert routes.route(handed) is None and routes.route(kept) is committer.outbox
    assert [a.offset for a in committer.outbox.take({kept: 10, handed: 10})] == [3]


async def test_an_exactly_once_member_commits_again_as_soon_as_its_transaction_ended() -> None:
    """Its answers wait for its next transaction: by default it follows the last one
    at once (``transaction_commit_interval_ms``), not after ``commit_interval_ms``."""

    def committer(settings: KafkaSettings) -> TransactionalCommitter:
        return TransactionalCommitter(
            AIOKafkaConsumer(),  # not started: no broker is asked
            "group",
            {},
            settings=settings,
            routes=AnswerRoutes(),
            metrics=KafkaMetrics(),
        )

    assert committer(KafkaSettings(delivery="exactly_once")).interval == 0
    environ = {"A2A_KAFKA_TRANSACTION_COMMIT_INTERVAL_MS": "7", "A2A_DELIVERY": "exactly_once"}
    assert committer(KafkaSettings.from_env(environ)).interval == 0.007


async def test_a_transactional_producer_sends_a_refused_write_again_soon() -> None:
    """A broker that checks each transactional write now and then refuses one with a
    retriable error; the producer sends it again after ``transaction_retry_backoff_ms``
    (20 ms unless set), not aiokafka's 100 ms."""
    default = transactional_producer_options(KafkaSettings(delivery="exactly_once"), "g")
    assert default["retry_backoff_ms"] == 20
    environ = {"A2A_KAFKA_TRANSACTION_RETRY_BACKOFF_MS": "5", "A2A_KAFKA_TRANSACTIONAL_ID": "r1"}
    options = transactional_producer_options(KafkaSettings.from_env(environ), "g")
    assert (options["retry_backoff_ms"], options["transactional_id"]) == (5, "r1.g")
    assert (options["acks"], options["enable_idempotence"]) == ("all", True)
    producer = AIOKafkaProducer(**options)  # aiokafka takes every option as given
    await producer.stop()


def test_binary_cloudevent_record() -> None:
    event = new_event({"type": "x", "source": "src", "id": "e1"}, {"a": 1})
    record = to_kafka(event)
    out = decode_record(Adaptor(), "t", 0, 3, record.value, record.headers, record.key)
    assert not out.failures
    [decoded] = out.events
    assert decoded.event.get_id() == "e1"
    assert decoded.dedup_key == ("src", "e1")
    assert not decoded.raw


def test_structured_cloudevent_record() -> None:
    event = new_event({"type": "x", "source": "src", "id": "e2"}, {"a": 1})
    record = to_kafka(event, "structured")
    out = decode_record(Adaptor(), "t", 0, 3, record.value, record.headers, record.key)
    assert [d.event.get_id() for d in out.events] == ["e2"]


def test_raw_request_is_keyed_by_position_not_by_its_id() -> None:
    message = {"jsonrpc": "2.0", "method": "m", "id": 1}
    out = decode_record(Adaptor(), "t", 2, 5, orjson.dumps(message), [], None)
    [decoded] = out.events
    assert decoded.raw
    assert decoded.event.get_id() == "1"
    assert decoded.dedup_key == ("raw", "t/2/5")


def test_raw_notification_takes_an_id_from_its_position() -> None:
    batch = [{"jsonrpc": "2.0", "method": "n"}, {"jsonrpc": "2.0", "method": "n"}]
    out = decode_record(Adaptor(), "t", 2, 5, orjson.dumps(batch), [], None)
    assert [d.event.get_id() for d in out.events] == ["t/2/5/0", "t/2/5/1"]
    again = decode_record(Adaptor(), "t", 2, 5, orjson.dumps(batch), [], None)
    assert [d.event.get_id() for d in again.events] == ["t/2/5/0", "t/2/5/1"]


@pytest.mark.parametrize(
    ("value", "code"),
    [(b"\x00garbage", -32700), (b'{"hello": 1}', -32600), (b"[]", -32600), (None, -32600)],
)
def test_undecodable_records_fail_with_a_reason(value: bytes | None, code: int) -> None:
    out = decode_record(Adaptor(), "t", 0, 0, value, [], None)
    assert not out.events
    assert out.failures[0].code == code
    assert failure_reason(out.failures).startswith("undecodable: ")


def test_broken_binary_cloudevent_fails() -> None:
    out = decode_record(Adaptor(), "t", 0, 0, b"{}", [("ce_specversion", b"1.0")], None)
    assert not out.events and out.failures


def test_dead_letter_headers_replace_earlier_reasons() -> None:
    original = [("ce_id", b"1"), ("a2a-dlq-reason", b"old")]
    letter = DeadLetter("topic", 2, 7, b"{}", None, original, "new")
    headers = dict(dead_letter_headers(letter))
    assert headers == {
        "ce_id": b"1",
        "a2a-dlq-reason": b"new",
        "a2a-dlq-source-topic": b"topic",
        "a2a-dlq-source-partition": b"2",
        "a2a-dlq-source-offset": b"7",
    }


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


def test_kafka_benchmark_without_a_broker_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from a2a_bus.bench.kafka import run

    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    report = run(quick=True)
    assert report.rows == []
    assert "not run" in report.title
    assert "KAFKA_BOOTSTRAP_SERVERS" in report.notes[0]


def test_subscribe_refuses_a_bare_string_and_nothing_on_every_transport() -> None:
    from a2a_bus.transport.base import TopicPattern, checked_topics

    with pytest.raises(TypeError, match="not a str"):
        checked_topics("orders")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one topic"):
        checked_topics([])
    pattern = TopicPattern(r"^a2a\.topic\..*$")
    assert checked_topics(pattern) is pattern
    assert checked_topics(["a", "b"]) == ["a", "b"]


def test_an_inbox_group_is_named_after_its_set_of_topics() -> None:
    group = composition_group("a2a.inbox", ["a2a.agent.b", "a2a.agent.a"])
    assert group == composition_group("a2a.inbox", ["a2a.agent.a", "a2a.agent.b"])
    assert group != composition_group("a2a.inbox", ["a2a.agent.a"])
    assert is_composition_group("a2a.inbox", group)
    assert not is_composition_group("a2a.inbox", "a2a.inbox.other")
    assert not is_composition_group("a2a.inbox", group.replace("a2a.inbox", "a2a.inboxes"))


def test_the_inbox_consumer_waits_longer_the_more_partitions_it_fetches() -> None:
    settings = KafkaSettings()
    waits = [idle_fetch_wait(settings, partitions) for partitions in (30, 300, 3_000, 30_000)]
    assert waits == [settings.fetch_max_wait_ms, 450, 4_500, settings.inbox_fetch_max_wait_ms]
    assert idle_fetch_wait(KafkaSettings(inbox_fetch_max_wait_ms=1_000), 3_000) == 1_000


def test_the_delivery_mode_comes_from_a2a_delivery_and_a_bad_one_is_named() -> None:
    assert not KafkaSettings.from_env({}).exactly_once
    assert KafkaSettings.from_env({"A2A_DELIVERY": "Exactly_Once"}).exactly_once
    with pytest.raises(ValueError, match="A2A_DELIVERY='twice'"):
        KafkaSettings.from_env({"A2A_DELIVERY": "twice"})
    with pytest.raises(ValueError, match="delivery must be"):
        KafkaSettings(delivery="twice")
