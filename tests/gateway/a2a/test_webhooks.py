"""Push deliveries to a real webhook receiver (Starlette under uvicorn on 127.0.0.1):
retries after 500 with one delivery id, the token header, de-duplication by delivery
id, give-up on 4xx, the URL policy at send time, order per config, the counters."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
import uvicorn
from prometheus_client import REGISTRY
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_bus.gateway import GatewaySettings
from a2a_bus.gateway.a2a.model import Message, Part, Task, TaskState
from a2a_bus.gateway.a2a.push import PushConfig, delivery_id, push_payload
from a2a_bus.gateway.a2a.webhooks import Outcome, RetryPolicy, WebhookSender
from a2a_bus.gateway.a2a.wire import Version
from a2a_bus.gateway.url_policy import AllowList
from tests.ports import free_ports

pytestmark = pytest.mark.timeout(120)

WAIT = 20.0  # seconds; a guard against hangs, never a performance limit
LOOPBACK = AllowList.parse("127.0.0.1/32")
#: Quick retries: the tests count attempts, they do not time them.
FAST = RetryPolicy(max_attempts=4, backoff=0.01, backoff_max=0.05, timeout=WAIT)


@dataclass
class Receiver:
    """A webhook: answers the scripted statuses in turn (then 200), records every POST,
    and handles each delivery id once, as a receiver should."""

    statuses: list[int] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    posts: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    handled: dict[str, Any] = field(default_factory=dict)
    url: str = ""

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        self.posts.append((dict(request.headers), body))
        status = self.statuses.pop(0) if self.statuses else 200
        if status == 200:
            self.handled.setdefault(request.headers["x-a2a-delivery-id"], orjson.loads(body))
        return Response(status_code=status, headers=self.headers)

    def header(self, name: str) -> list[str]:
        return [headers.get(name.lower(), "") for headers, _ in self.posts]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    hook = Receiver()
    app = Starlette(routes=[Route("/hook", hook.hook, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not (server.started or serving.done()):
        await asyncio.sleep(0.01)
    hook.url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/hook"
    yield hook
    server.should_exit = True
    await asyncio.wait_for(serving, WAIT)


@pytest.fixture
async def sender() -> AsyncIterator[WebhookSender]:
    async with WebhookSender(LOOPBACK, FAST) as running:
        yield running


def completed_task() -> Task:
    task = Task("ctx", [Message("user", [Part.text("hi")])], id="t1")
    task.set_state(TaskState.COMPLETED, task.agent_message([Part.text("done")]))
    return task


def counted(outcome: str) -> float:
    return REGISTRY.get_sample_value("a2a_push_deliveries_total", {"outcome": outcome}) or 0.0


async def within(awaitable: Any) -> Any:
    return await asyncio.wait_for(awaitable, WAIT)


async def test_a_500_is_retried_with_the_same_delivery_id(
    receiver: Receiver, sender: WebhookSender
) -> None:
    receiver.statuses = [500, 503]
    config = PushConfig("t1", "c1", receiver.url, token="tok")
    payload = push_payload(completed_task(), Version.V1)
    delivered = counted("delivered")
    retried = REGISTRY.get_sample_value("a2a_push_retries_total") or 0.0
    outcome = await within(sender.deliver(config, payload, delivery_id("t1", 2, "c1")))
    assert outcome is Outcome.DELIVERED
    assert receiver.header("x-a2a-delivery-id") == [delivery_id("t1", 2, "c1")] * 3
    assert receiver.header("x-a2a-delivery-attempt") == ["1", "2", "3"]
    assert receiver.header("x-a2a-notification-token") == ["tok"] * 3
    assert receiver.header("content-type") == ["application/json"] * 3
    assert [body for _, body in receiver.posts] == [payload] * 3
    assert counted("delivered") == delivered + 1
    assert REGISTRY.get_sample_value("a2a_push_retries_total") == retried + 2


async def test_a_receiver_drops_a_repeated_delivery(
    receiver: Receiver, sender: WebhookSender
) -> None:
    """Two gateways (or a retry whose answer was lost) deliver the same change: the
    receiver sees the same delivery id twice and handles it once."""
    config = PushConfig("t1", "c1", receiver.url)
    task = completed_task()
    same = delivery_id("t1", 5, "c1")
    async with WebhookSender(LOOPBACK, FAST) as other_gateway:
        outcomes = await within(
            asyncio.gather(
                sender.deliver(config, push_payload(task, Version.V1), same),
                other_gateway.deliver(config, push_payload(task, Version.V1), same),
            )
        )
    assert outcomes == [Outcome.DELIVERED, Outcome.DELIVERED]
    assert len(receiver.posts) == 2
    assert list(receiver.handled) == [same]
    assert receiver.handled[same]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_status_change_goes_to_every_config_in_its_version(
    receiver: Receiver, sender: WebhookSender
) -> None:
    configs = [
        PushConfig("t1", "new", receiver.url + "?v=1", token="a"),
        PushConfig("t1", "old", receiver.url + "?v=03", token="b", version=Version.V03),
    ]
    task = completed_task()
    futures = sender.notify(task, 7, configs)
    task.set_state(TaskState.FAILED)  # after the call: the payload is already taken
    assert await within(asyncio.gather(*futures)) == [Outcome.DELIVERED] * 2
    by_token = {headers["x-a2a-notification-token"]: headers for headers, _ in receiver.posts}
    assert by_token["a"]["x-a2a-delivery-id"] == delivery_id("t1", 7, "new")
    assert by_token["b"]["x-a2a-delivery-id"] == delivery_id("t1", 7, "old")
    v1 = receiver.handled[delivery_id("t1", 7, "new")]
    assert v1["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    legacy = receiver.handled[delivery_id("t1", 7, "old")]
    assert (legacy["kind"], legacy["status"]["state"]) == ("task", "completed")


async def test_every_attempt_failing_gives_up(receiver: Receiver, sender: WebhookSender) -> None:
    receiver.statuses = [500] * 10
    failed = counted("failed")
    config = PushConfig("t1", "c1", receiver.url)
    outcome = await within(sender.deliver(config, b"{}", "d1"))
    assert outcome is Outcome.FAILED
    assert len(receiver.posts) == FAST.max_attempts
    assert counted("failed") == failed + 1


@pytest.mark.parametrize("status", [400, 401, 404, 410, 302])
async def test_a_client_error_is_not_retried(
    receiver: Receiver, sender: WebhookSender, status: int
) -> None:
    receiver.statuses = [status]
    receiver.headers = {"location": "http://10.0.0.1/"} if status == 302 else {}
    rejected = counted("rejected")
    outcome = await within(sender.deliver(PushConfig("t1", "c1", receiver.url), b"{}", "d1"))
    assert outcome is Outcome.REJECTED
    assert len(receiver.posts) == 1  # and a redirect is not followed
    assert counted("rejected") == rejected + 1


async def test_429_is_retried(receiver: Receiver, sender: WebhookSender) -> None:
    receiver.statuses = [429]
    receiver.headers = {"retry-after": "0"}
    outcome = await within(sender.deliver(PushConfig("t1", "c1", receiver.url), {"a": 1}, "d1"))
    assert outcome is Outcome.DELIVERED
    assert [body for _, body in receiver.posts] == [b'{"a":1}'] * 2


@pytest.mark.parametrize("value", ["\u00b2", "9" * 5000, "soon"])
async def test_a_retry_after_that_is_no_number_of_seconds_is_ignored(
    receiver: Receiver, sender: WebhookSender, value: str
) -> None:
    receiver.statuses = [503]
    receiver.headers = {"retry-after": value}
    outcome = await within(sender.deliver(PushConfig("t1", "c1", receiver.url), b"{}", "d1"))
    assert outcome is Outcome.DELIVERED
    assert len(receiver.posts) == 2


async def test_a_fault_of_the_sender_ends_the_delivery_counted(
    receiver: Receiver, sender: WebhookSender
) -> None:
    """A config no header can carry (set before headers were checked, or a bug) ends
    as a failed delivery, logged and counted, not as a task nobody reads."""
    failed = counted("failed")
    config = PushConfig("t1", "c1", receiver.url, token="tökén")
    outcome = await within(sender.deliver(config, b"{}", "d1"))
    assert outcome is Outcome.FAILED
    assert receiver.posts == []
    assert counted("failed") == failed + 1


async def test_a_connection_refused_is_retried() -> None:
    [port] = free_ports(1)  # nothing listens on it
    async with WebhookSender(LOOPBACK, FAST) as sender:
        config = PushConfig("t1", "c1", f"http://127.0.0.1:{port}/hook")
        assert await within(sender.deliver(config, b"{}", "d1")) is Outcome.FAILED


async def test_loopback_is_refused_unless_allowed(receiver: Receiver) -> None:
    refused = counted("refused")
    async with WebhookSender(AllowList(), FAST) as strict:
        outcome = await within(strict.deliver(PushConfig("t1", "c1", receiver.url), b"{}", "d1"))
    assert outcome is Outcome.REFUSED
    assert receiver.posts == []
    assert counted("refused") == refused + 1
    settings = GatewaySettings(push_allow=("127.0.0.1/32",))
    async with WebhookSender.from_settings(settings) as allowed:
        outcome = await within(allowed.deliver(PushConfig("t1", "c1", receiver.url), b"{}", "d1"))
    assert outcome is Outcome.DELIVERED
    assert len(receiver.posts) == 1


async def test_the_url_is_checked_again_before_each_post(receiver: Receiver) -> None:
    """The host's address changes after registration (DNS rebinding): refused. The POST
    goes to the address checked, not to a second resolution (``hooks.test`` has none)."""
    addresses = ["127.0.0.1"]

    async def resolver(host: str, port: int) -> list[str]:
        return list(addresses)

    url = receiver.url.replace("127.0.0.1", "hooks.test")
    async with WebhookSender(LOOPBACK, FAST, resolver=resolver) as sender:
        config = PushConfig("t1", "c1", url)
        assert await within(sender.deliver(config, b"{}", "d1")) is Outcome.DELIVERED
        assert receiver.header("host") == [url.split("/")[2]]
        addresses[:] = ["10.0.0.7"]
        assert await within(sender.deliver(config, b"{}", "d2")) is Outcome.REFUSED
    assert len(receiver.posts) == 1


async def test_submitted_deliveries_keep_their_order_per_config(
    receiver: Receiver, sender: WebhookSender
) -> None:
    receiver.statuses = [500, 500]
    config = PushConfig("t1", "c1", receiver.url)
    futures = [sender.submit(config, {"n": n}, delivery_id("t1", n, "c1")) for n in (1, 2, 3)]
    assert sender.pending == 3
    assert await within(asyncio.gather(*futures)) == [Outcome.DELIVERED] * 3
    assert [orjson.loads(body)["n"] for _, body in receiver.posts] == [1, 1, 1, 2, 3]
    assert sender.pending == 0


async def test_stop_drops_what_is_pending(receiver: Receiver) -> None:
    receiver.statuses = [500] * 100
    slow = RetryPolicy(max_attempts=100, backoff=WAIT, backoff_max=WAIT)
    dropped = counted("dropped")
    sender = WebhookSender(LOOPBACK, slow)
    await sender.start()
    future = sender.submit(PushConfig("t1", "c1", receiver.url), b"{}", "d1")
    while not receiver.posts:
        await asyncio.sleep(0.01)
    await within(sender.stop())
    assert future.cancelled()
    assert counted("dropped") == dropped + 1


async def test_too_many_pending_are_dropped(receiver: Receiver) -> None:
    async with WebhookSender(LOOPBACK, FAST, max_pending=1) as sender:
        first = sender.submit(PushConfig("t1", "c1", receiver.url), b"{}", "d1")
        second = sender.submit(PushConfig("t1", "c1", receiver.url), b"{}", "d2")
        assert second.result() is Outcome.DROPPED
        assert await within(first) is Outcome.DELIVERED


async def test_a_sender_must_be_started() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        await WebhookSender().deliver(PushConfig("t1", "c1", "http://127.0.0.1/"), b"{}", "d")


def test_backoff_doubles_with_jitter_up_to_the_bound() -> None:
    policy = RetryPolicy(backoff=1.0, backoff_max=5.0)
    assert [policy.delay(n, rand=1.0) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert [policy.delay(n, rand=0.0) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert policy.delay(1, retry_after=3.0, rand=0.0) == 3.0
    assert policy.delay(1, retry_after=60.0) == 5.0
