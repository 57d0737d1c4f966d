"""How a host answers: a failed notification is dead-lettered with the handler's
error as its reason (kept short), the agent and the attempts; a request's error
reaches its caller, and nothing is dead-lettered for it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.hosting.answering import AGENT_HEADER, ATTEMPTS_HEADER, handler_error
from a2a_bus.transport.dead_letters import DLQ_REASON
from tests.buses import header, make_bus, read_dlq

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite


class Refuser(Agent):
    agent_id = "refuser"

    @method
    def refuse(self, why: str) -> None:
        raise JsonRpcError(-32010, "Refused", why)


def test_a_handler_error_reason_names_the_code_the_message_and_a_short_detail() -> None:
    def reason(data: object) -> str:
        return handler_error(JsonRpcError(-32010, "Refused", data))

    assert reason("no") == "handler-error: -32010 Refused: no"
    assert reason("x" * 2_000) == "handler-error: -32010 Refused: " + "x" * 500
    # Data that is not text is not put in a header.
    assert reason({"a": 1}) == "handler-error: -32010 Refused"


async def test_a_failed_notification_is_dead_lettered_and_a_failed_request_answered(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Refuser)
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as refused:
        await client.request("refuser", "refuse", ["asked"])
    assert (refused.value.code, refused.value.data) == (-32010, "asked")
    await client.notify("refuser", "refuse", ["told"])
    [letter] = await read_dlq(bus, 1)
    assert letter.event.get_data()["params"] == ["told"]
    assert header(letter, DLQ_REASON) == "handler-error: -32010 Refused: told"
    assert header(letter, AGENT_HEADER) == "refuser"
    assert header(letter, ATTEMPTS_HEADER) == "1"
    assert bus.metrics.dead_letters == 1
