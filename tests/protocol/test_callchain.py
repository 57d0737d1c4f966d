"""Call depth and chain: what a handler's message carries, and when it is refused."""

from __future__ import annotations

from a2a_bus.protocol import ErrorCode, call_chain, call_depth, depth_refusal, next_call
from a2a_bus.protocol.callchain import MAX_CHAIN


def test_a_message_from_outside_is_depth_zero_with_no_chain() -> None:
    assert call_depth({}) == 0
    assert call_chain({}) == []


def test_a_handlers_message_is_one_deeper_and_names_the_handler() -> None:
    assert next_call({}, "a") == (1, "a")
    assert next_call({"calldepth": 1, "callchain": "a"}, "b") == (2, "a,b")


def test_a_received_depth_that_is_no_count_counts_as_zero() -> None:
    assert call_depth({"calldepth": "3"}) == 0
    assert call_depth({"calldepth": -1}) == 0
    assert call_depth({"calldepth": True}) == 0


def test_the_chain_keeps_the_latest_agents_and_the_depth_all() -> None:
    depth, chain = 0, ""
    for number in range(MAX_CHAIN + 5):
        depth, chain = next_call({"calldepth": depth, "callchain": chain}, f"a{number}")
    assert depth == MAX_CHAIN + 5
    names = chain.split(",")
    assert len(names) == MAX_CHAIN and names[-1] == f"a{MAX_CHAIN + 4}" and names[0] == "a5"


def test_depth_within_the_limit_goes() -> None:
    assert depth_refusal(None, 8, None) is None
    assert depth_refusal(0, 8, None) is None
    assert depth_refusal(8, 8, "a") is None


def test_past_the_limit_the_error_names_the_chain() -> None:
    error = depth_refusal(9, 8, "a,b,a,b,a,b,a,b,a")
    assert error is not None
    assert error.code == ErrorCode.CALL_TOO_DEEP == -32008
    assert error.message == "Call chain too deep"
    assert (
        error.data
        == "call depth 9 passes the limit of 8: a -> b -> a -> b -> a -> b -> a -> b -> a"
    )


def test_a_cut_chain_says_so() -> None:
    error = depth_refusal(40, 8, "x,y")
    assert error is not None and error.data.endswith(": ... -> x -> y")


def test_a_depth_that_is_no_count_is_an_invalid_request() -> None:
    for bad in ("3", -1, 1.5, True):
        error = depth_refusal(bad, 8, None)
        assert error is not None and error.code == ErrorCode.INVALID_REQUEST, bad
