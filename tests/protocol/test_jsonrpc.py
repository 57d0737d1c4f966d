"""JSON-RPC calls carry their routing members in ``params``: one beside it is
refused as an Invalid Request rather than ignored (ignored, the call would go where
its method leads, not to the agent or topic it names)."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_bus.protocol import Adaptor, ErrorCode, Failure, Kind, classify

CALL = {"jsonrpc": "2.0", "method": "add", "params": {"a": 1, "b": 2}, "id": 7}


@pytest.mark.parametrize("member", ["_agentId", "_topic", "_seq", "_sessionId"])
def test_a_routing_member_beside_params_is_an_invalid_request(member: str) -> None:
    value: Any = 1 if member == "_seq" else "calc"
    failure = classify({**CALL, member: value})
    assert isinstance(failure, Failure)
    assert failure.code == ErrorCode.INVALID_REQUEST
    assert failure.id == 7  # answered with the call's id
    assert f'"{member}" belongs in "params"' in str(failure.data)


def test_a_notification_with_a_misplaced_routing_member_is_refused_too() -> None:
    notification = {"jsonrpc": "2.0", "method": "news", "_topic": "tech"}
    failure = classify(notification)
    assert isinstance(failure, Failure) and failure.id is None


def test_routing_members_in_params_and_other_extra_members_still_pass() -> None:
    routed = {**CALL, "params": {"a": 1, "b": 2, "_agentId": "calc", "_seq": 0}}
    assert classify(routed) is Kind.REQUEST
    assert classify({**CALL, "x-trace": "abc"}) is Kind.REQUEST  # not ours: left alone


def test_the_adaptor_refuses_the_call_instead_of_routing_it_by_method() -> None:
    [result] = Adaptor().from_json({**CALL, "_agentId": "echo"})
    assert isinstance(result, Failure) and result.code == ErrorCode.INVALID_REQUEST
    [event] = Adaptor().from_json({**CALL, "params": {"a": 1, "b": 2, "_agentId": "echo"}})
    assert not isinstance(event, Failure)
    assert event.get_extension("targetagent") == "echo"
