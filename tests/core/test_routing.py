"""Unit tests of topic naming, subject wildcards and route decisions, and of what a bad
name answers: -32600 has one shape everywhere, ``"Invalid Request"`` with the detail
in ``data``."""

from __future__ import annotations

import re

import pytest

from a2a_bus import Bus, JsonRpcError
from a2a_bus.core.routing import (
    RouteKind,
    RoutingError,
    Topics,
    decide,
    subject_matches,
    subject_regex,
    validate_name,
    validate_subject,
)
from a2a_bus.protocol import Adaptor, new_event
from a2a_bus.transport.base import MAX_TOPIC_CHARS, TopicPattern

adaptor = Adaptor()
topics = Topics("a2a")


def event(message: dict) -> object:
    item = adaptor.from_json(message)[0]
    assert not hasattr(item, "code"), item
    return item


def test_topic_names_and_prefix() -> None:
    assert topics.agent("calc") == "a2a.agent.calc"
    assert topics.subject("orders.eu") == "a2a.topic.orders.eu"
    assert topics.reply("node1") == "a2a.reply.node1"
    assert (topics.registry, topics.ingress, topics.dlq) == (
        "a2a.registry",
        "a2a.ingress",
        "a2a.dlq",
    )
    assert Topics("acme").agent("x") == "acme.agent.x"


@pytest.mark.parametrize("bad", ["", "a b", "a/b", "ü", None, 7, "x*"])
def test_invalid_names_are_rejected(bad: object) -> None:
    with pytest.raises(RoutingError):
        validate_name(bad)


@pytest.mark.parametrize(
    ("pattern", "subject", "matches"),
    [
        ("orders.*", "orders.eu", True),
        ("orders.*", "orders.eu.paris", False),
        ("orders.*", "orders", False),
        ("orders.#", "orders.eu.paris", True),
        ("orders.#", "orders", False),
        ("*.created", "user.created", True),
        ("orders.eu", "orders.eu", True),
        ("orders.eu", "ordersXeu", False),
        ("#.*.#", "a.b", False),  # side by side: three segments or more
        ("#.*.#", "a.b.c", True),
        ("#.#.x", "a.x", False),
        ("#.#.x", "a.b.x", True),
        ("*.*", "a.b.c", False),
        ("a.#.b.#", "a.x.b.y.z", True),
        ("a.#.b.#", "a.b.y", False),
    ],
)
def test_subject_wildcards(pattern: str, subject: str, matches: bool) -> None:
    assert subject_matches(pattern, subject) is matches


def test_wildcard_subscription_is_a_topic_pattern() -> None:
    target = topics.subscription("orders.*")
    assert isinstance(target, TopicPattern)
    assert topics.subscription("orders.eu") == "a2a.topic.orders.eu"
    with pytest.raises(RoutingError):
        topics.subject("orders.*")  # no wildcards when publishing


def test_wildcards_side_by_side_are_one_count_so_matching_cannot_blow_up() -> None:
    """``#.#.#`` as nested repeats would let the regex engine try every split of a long
    topic that does not match (seconds per topic, the loop blocked): one count instead."""
    regex = subject_regex("a2a.topic." + ".".join(["#"] * 11) + ".x")
    assert regex.count("(?:") == 1 and "{10,}" in regex
    assert re.match(regex, "a2a.topic." + ".".join(["a"] * 60)) is None


def test_a_subscription_s_hash_stands_in_at_most_two_places() -> None:
    assert isinstance(topics.subscription("a.#.b.#"), TopicPattern)
    assert isinstance(topics.subscription("#.*.#.b.#.#"), TopicPattern)  # two runs
    with pytest.raises(RoutingError, match="'#' may stand in at most 2 places"):
        topics.subscription("#.a.#.b.#")


def test_a_wildcard_subject_is_bounded_like_any_other() -> None:
    with pytest.raises(RoutingError, match="subject too long"):
        topics.subscription("a" * MAX_TOPIC_CHARS + ".#")


def test_route_p2p_pubsub_method_reply() -> None:
    p2p = decide(
        event({"jsonrpc": "2.0", "method": "m", "params": {"_agentId": "a"}, "id": 1}), topics
    )
    assert (p2p.kind, p2p.topic) == (RouteKind.P2P, "a2a.agent.a")
    pub = decide(event({"jsonrpc": "2.0", "method": "m", "params": {"_topic": "news.x"}}), topics)
    assert (pub.kind, pub.topic) == (RouteKind.PUBSUB, "a2a.topic.news.x")
    owners = {"tools/call": "toolbox"}
    by_method = decide(
        event({"jsonrpc": "2.0", "method": "tools/call", "id": 2}), topics, owners.get
    )
    assert (by_method.kind, by_method.topic) == (RouteKind.BY_METHOD, "a2a.agent.toolbox")
    request = event({"jsonrpc": "2.0", "method": "m", "id": 3})
    answer = adaptor.response_event(request, {"jsonrpc": "2.0", "result": 1, "id": 3})
    answer.get_attributes()["replyto"] = "a2a.reply.n1"
    reply = decide(answer, topics)
    assert (reply.kind, reply.topic, reply.key) == (RouteKind.REPLY, "a2a.reply.n1", b"3")


def test_unknown_method_is_32601_and_unroutable_is_32600() -> None:
    with pytest.raises(RoutingError) as unknown:
        decide(event({"jsonrpc": "2.0", "method": "nope", "id": 1}), topics, {}.get)
    assert unknown.value.code == -32601
    native = new_event({"source": "s", "type": "t"})
    with pytest.raises(RoutingError) as nowhere:
        decide(native, topics)
    assert nowhere.value.code == -32600
    bad_target = new_event({"source": "s", "type": "t", "targetagent": "no/slash"})
    with pytest.raises(RoutingError):
        decide(bad_target, topics)


def test_stream_chunks_share_a_key() -> None:
    chunks = [
        event(
            {
                "jsonrpc": "2.0",
                "method": "m",
                "params": {"_agentId": "a", "_sessionId": "s1", "_seq": n},
            }
        )
        for n in range(3)
    ]
    assert {decide(c, topics).key for c in chunks} == {b"s1"}


# -- -32600 has one shape: "Invalid Request", the detail in data ---------------------------


@pytest.mark.parametrize(
    ("check", "detail"),
    [
        (lambda: validate_name("no body!"), "invalid agent id 'no body!': must match"),
        (lambda: validate_name("calc\n"), "invalid agent id 'calc\\n': must match ^[A-Za-z0"),
        (lambda: validate_subject("a..b"), "invalid subject 'a..b': segments are"),
        (lambda: validate_subject(""), "invalid subject ''"),
        (lambda: Topics("bad prefix"), "invalid topic prefix 'bad prefix'"),
        (lambda: topics.subject("s" * 240), "subject too long: its topic a2a.topic.sss"),
        (lambda: topics.agent("a" * 240), "agent id too long: its topic a2a.agent.aaa"),
    ],
)
def test_a_bad_name_answers_invalid_request_with_the_detail_in_data(
    check: object, detail: str
) -> None:
    with pytest.raises(RoutingError) as raised:
        check()  # type: ignore[operator]
    assert str(raised.value).startswith(detail)  # Python callers still read the detail
    error = raised.value.json_rpc_error()
    assert (error.code, error.message) == (-32600, "Invalid Request")
    assert error.data.startswith(detail)
    assert error.to_dict() == {"code": -32600, "message": "Invalid Request", "data": error.data}


def test_other_codes_keep_their_message_and_data() -> None:
    error = RoutingError(-32601, "Method not found", "nope").json_rpc_error()
    assert (error.code, error.message, error.data) == (-32601, "Method not found", "nope")


def test_publish_to_an_invalid_subject_is_invalid_request_with_data() -> None:
    with Bus.memory(heartbeat=60.0) as bus, pytest.raises(JsonRpcError) as raised:
        bus.client().publish("bad subject!", {"n": 1})
    assert (raised.value.code, raised.value.message) == (-32600, "Invalid Request")
    assert raised.value.data.startswith("invalid subject 'bad subject!'")


def test_a_request_or_stream_to_an_invalid_agent_id_is_invalid_request_with_data() -> None:
    with Bus.memory(heartbeat=60.0) as bus:
        client = bus.client()
        with pytest.raises(JsonRpcError) as raised:
            client.request("no body!", "echo", {})
        assert (raised.value.code, raised.value.message) == (-32600, "Invalid Request")
        assert raised.value.data.startswith("invalid agent id 'no body!'")
        with pytest.raises(JsonRpcError) as streamed:
            list(client.stream("no body!", "count", {"to": 2}))
        assert (streamed.value.code, streamed.value.message) == (-32600, "Invalid Request")
        assert streamed.value.data.startswith("invalid agent id 'no body!'")
        for not_a_name in (5, ["calc"]):  # not a string at all: the same answer, no TypeError
            with pytest.raises(JsonRpcError) as typed:
                client.request(not_a_name, "echo", {})  # type: ignore[arg-type]
            assert (typed.value.code, typed.value.message) == (-32600, "Invalid Request")
            assert typed.value.data.startswith(f"invalid agent id {not_a_name!r}")


def test_names_are_bounded_by_the_longest_topic_kafka_takes_on_every_transport() -> None:
    """A subject or agent id whose topic would pass Kafka's 249 characters is refused
    when routed, in memory as on Kafka (where the broker would refuse the topic)."""
    longest = "s" * (MAX_TOPIC_CHARS - len("a2a.topic."))
    assert len(topics.subject(longest)) == MAX_TOPIC_CHARS
    assert len(topics.agent("a" * (MAX_TOPIC_CHARS - len("a2a.agent.")))) == MAX_TOPIC_CHARS
    with pytest.raises(RoutingError) as raised:
        topics.subject(longest + "s")
    assert "would have 250 characters, more than the 249" in str(raised.value)
    with Bus.memory(heartbeat=60.0) as bus, pytest.raises(JsonRpcError) as published:
        bus.client().publish(longest + "s", {"n": 1})
    assert (published.value.code, published.value.message) == (-32600, "Invalid Request")
    assert published.value.data.startswith("subject too long")
