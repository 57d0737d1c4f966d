"""Bus.send now raises JsonRpcError for a notification it cannot route: callers that
took a notification's outcome as "nothing to answer" and relied on the old DLQ."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import pytest

from a2a_bus import Bus
from tests.bus.agents import Calc
from tests.bus.test_behaviour import WAIT, make_bus
from tests.cli.test_serve_call import run

__all__ = ["make_bus"]

MakeBus = Callable[..., Awaitable[Bus]]


async def test_a_batch_with_an_unroutable_notification_answers_its_requests(
    make_bus: MakeBus,
) -> None:
    """Bug: AsyncClient.call (a2a_bus/client.py, ``call``/``_one``) gathers the batch's
    elements with asyncio.gather; since Bus.send raises for an unroutable notification
    (a2a_bus/bus.py ``send``, ``raise error from None``), one such notification makes
    ``call`` raise JsonRpcError: the other elements' responses are lost although their
    requests were sent and handled. The wire mapping says an element that cannot be
    converted yields its own error and does not sink its neighbours; a notification is
    never answered. Correct: ``call`` returns the request's response and nothing for the
    notification."""
    bus = await make_bus(Calc)
    client = bus.async_client()
    batch = [
        {"jsonrpc": "2.0", "method": "subtract", "params": [5, 3], "id": 1},
        {"jsonrpc": "2.0", "method": "no.such.method", "params": {}},
    ]
    responses = await asyncio.wait_for(client.call(batch), WAIT)
    assert responses == [{"jsonrpc": "2.0", "result": 2, "id": 1}]


@pytest.mark.kafka
def test_cli_notify_of_an_unknown_method_is_one_error_line(kafka_bootstrap: str) -> None:
    """Bug: ``a2a-bus call --notify --kafka ...`` goes through AsyncClient.call, which
    now raises the bus's refusal of an unroutable notification (-32601); the command
    does not catch JsonRpcError (a2a_bus/cli/call.py, run_on_kafka) and prints a Python
    traceback. The CLI's rule (tests/cli/test_failures.py) is one ``error:`` line on
    stderr, no traceback, exit 1. Correct: exit 1 with one line naming the refusal."""
    prefix = f"rv{uuid.uuid4().hex[:8]}"
    done = run(
        "call", "no.such.method", "{}", "--notify", "--kafka", kafka_bootstrap, "--prefix", prefix
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith(("error:", "Error:"))]
    assert len(errors) == 1, done.stderr
