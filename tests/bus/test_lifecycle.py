"""Bus lifecycles under stress: a start that fails half way, an agent whose start
fails or keeps failing, a stop while it does, a stop while a handler does not
return, a handler that stops its own bus, a spawn that fails on a running bus;
calls on a bus that is not running (before its start, after its stop, after its
loop went away) fail with BusStopped.

Every await and join has a timeout, and anything a regression would leave behind
(actor threads, a wedged loop) is cleaned up so the rest of the suite is unaffected.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any

import pykka
import pytest

from a2a_bus import Agent, AsyncClient, Bus, BusStopped, Call, Client, RestartPolicy, method
from a2a_bus.protocol import ErrorCode, JsonRpcError, new_event
from a2a_bus.runtime.keepalive import ACTORS
from a2a_bus.transport.dead_letters import DLQ_REASON
from tests.buses import eventually, header, read_dlq

WAIT = 10.0
QUICK = RestartPolicy(max_retries=2, backoff_initial=0.005, backoff_max=0.02)


@pytest.fixture(autouse=True)
def no_actor_left() -> Iterator[None]:
    """An agent actor left running keeps the process alive (a2a_bus.runtime.keepalive):
    one leaked would keep pytest from exiting."""
    yield
    pykka.ActorRegistry.stop_all(block=True, timeout=WAIT)


@pytest.fixture(
    params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)],
)
async def new_bus(request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Bus]]:
    """A factory of buses, not started, on the transport under test (stopped afterwards)."""
    bootstrap = request.getfixturevalue("kafka_bootstrap") if request.param == "kafka" else None
    prefix = f"t{uuid.uuid4().hex[:10]}"
    buses: list[Bus] = []

    def make(**options: object) -> Bus:
        options.setdefault("prefix", prefix)
        options.setdefault("restart_policy", QUICK)
        if bootstrap is None:
            bus = Bus.memory(**options)
        else:
            bus = Bus.kafka(bootstrap, bus_options=options, metadata_max_age_ms=1000)
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        await asyncio.wait_for(bus.astop(), WAIT)


def live_actors() -> list[pykka.ActorRef[pykka.Actor]]:
    """Actors still running (the autouse fixture leaves none from earlier tests)."""
    return [ref for ref in pykka.ActorRegistry.get_all() if ref.is_alive()]


class Fine(Agent):
    agent_id = "fine"
    stops = 0

    def on_stop(self) -> None:
        Fine.stops += 1

    @method
    def ping(self) -> str:
        return "pong"


class BrokenConstructor(Agent):
    agent_id = "broken-constructor"

    def __init__(self) -> None:
        raise RuntimeError("configuration missing")

    @method
    def ping(self) -> str:
        return "pong"


# -- a start that fails half way ------------------------------------------------------


def test_a_sync_start_that_fails_stops_the_agents_it_already_started() -> None:
    """``start()`` raises the agent's error, and leaves nothing running: the agents
    started before the failing one are stopped (their ``on_stop`` runs), and
    ``bus.running`` is False."""
    Fine.stops = 0
    bus = Bus.memory()
    bus.spawn(Fine)
    bus.spawn(BrokenConstructor)
    with pytest.raises(RuntimeError, match="configuration missing"):
        bus.start()
    assert live_actors() == []
    assert Fine.stops == 1
    assert not bus.running


async def test_an_async_start_that_fails_leaves_the_bus_stopped() -> None:
    """``async with bus`` whose start fails: ``astart`` undoes what it did (as
    ``__aexit__`` does not run), so no agent is left running and the bus is stopped."""
    bus = Bus.memory()
    bus.spawn(Fine)
    bus.spawn(BrokenConstructor)
    with pytest.raises(RuntimeError, match="configuration missing"):
        async with bus:
            pass
    try:
        assert live_actors() == []
        assert not bus.running
    finally:
        if bus.running:
            await asyncio.wait_for(bus.astop(), WAIT)


async def test_a_bus_whose_start_failed_can_be_started_again(
    new_bus: Callable[..., Bus],
) -> None:
    """After a failed ``astart`` the bus is stopped, not half running: once the
    broken agent is taken out, the next ``astart`` starts it and it serves."""
    bus = new_bus()
    bus.spawn(Fine)
    broken = bus.spawn(BrokenConstructor)
    with pytest.raises(RuntimeError, match="configuration missing"):
        await asyncio.wait_for(bus.astart(), WAIT)
    assert not bus.running
    assert live_actors() == []
    bus.hosts.remove(broken)
    await asyncio.wait_for(bus.astart(), WAIT)
    assert await bus.async_client().request("fine", "ping", timeout=WAIT) == "pong"


# -- an agent whose on_start raises ---------------------------------------------------


class NeverStarts(Agent):
    """Its ``on_start`` always raises (a backend it needs is down)."""

    agent_id = "never-starts"
    starts = 0

    def on_start(self) -> None:
        NeverStarts.starts += 1
        raise ConnectionError("backend down")

    @method
    def ping(self) -> str:
        return "pong"


async def test_a_request_to_an_agent_that_cannot_start_is_answered_and_dead_lettered(
    new_bus: Callable[..., Bus],
) -> None:
    """Failed starts count against ``max_retries`` as crashes do: once more than 2
    starts in a row failed, the held request is dead-lettered with the reason (the
    failures in a row: the agent may have failed before the request came) and
    answered -32002 naming the agent and its start error. The replica does not
    give up meanwhile (see the test below)."""
    NeverStarts.starts = 0
    bus = new_bus(restart_policy=replace(QUICK, max_failed_starts=10**6))
    bus.spawn(NeverStarts)
    await asyncio.wait_for(bus.astart(), WAIT)
    with pytest.raises(JsonRpcError) as caught:
        await bus.async_client().request("never-starts", "ping", timeout=WAIT)
    assert (caught.value.code, caught.value.message) == (
        ErrorCode.AGENT_UNAVAILABLE,
        "Agent unavailable",
    )
    (letter,) = await read_dlq(bus, 1)
    reason, attempts = header(letter, DLQ_REASON), int(header(letter, "a2a-dlq-attempts"))
    assert attempts > QUICK.max_retries
    assert f"failed to start ({attempts} failed starts in a row)" in reason, reason
    assert "ConnectionError in on_start: backend down" in reason, reason
    assert caught.value.data == f"never-starts#0: {reason.removeprefix('handler-crash: ')}"
    assert NeverStarts.starts >= attempts


async def test_astop_returns_while_an_agent_crash_loops_in_on_start_with_a_request_held() -> None:
    """A stop does not wait for jobs held by an agent that cannot start: ``astop``
    ends them (dead, with the reason) and returns, even with restarts that would
    take long (a long backoff, many retries)."""
    slow_policy = RestartPolicy(max_retries=100, backoff_initial=60.0, backoff_max=60.0)
    bus = Bus.memory(restart_policy=slow_policy)
    bus.spawn(NeverStarts)
    await asyncio.wait_for(bus.astart(), WAIT)
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as caught:
        await asyncio.wait_for(client.request("never-starts", "ping", timeout=0.3), WAIT)
    assert caught.value.code == ErrorCode.TIMEOUT  # held, waiting for a restart
    stopping = asyncio.ensure_future(bus.astop())
    done, _ = await asyncio.wait({stopping}, timeout=WAIT)
    if not done:
        stopping.cancel()
    assert done, "astop() hung waiting for a job the crash-looping agent never runs"
    assert bus.transport.dead_lettered == 1


GIVES_UP = replace(QUICK, max_failed_starts=4)


async def test_an_agent_whose_start_keeps_failing_is_given_up_and_reported_failed(
    new_bus: Callable[..., Bus], caplog: pytest.LogCaptureFixture
) -> None:
    """After ``max_failed_starts`` failed starts in a row the agent is not started
    again: its card says ``failed`` with why, a request is answered -32002 at once
    (no wait for a timeout), a notification is dead-lettered with the reason, and the
    log says so once, not at every backoff forever."""
    NeverStarts.starts = 0
    bus = new_bus(restart_policy=GIVES_UP)
    bus.spawn(NeverStarts)
    await asyncio.wait_for(bus.astart(), WAIT)
    await eventually(lambda: "never-starts" in bus.directory.failed_here())
    starts = NeverStarts.starts
    assert starts == GIVES_UP.max_failed_starts
    card = bus.directory.card("never-starts")
    assert card is not None and card["status"] == "failed"
    assert card["failure"] == (
        "failed to start 4 times in a row; last: ConnectionError in on_start: backend down"
    )
    client = bus.async_client()
    with pytest.raises(JsonRpcError) as caught:
        await client.request("never-starts", "ping", timeout=WAIT)
    assert (caught.value.code, caught.value.message) == (
        ErrorCode.AGENT_UNAVAILABLE,
        "Agent unavailable",
    )
    assert caught.value.data == f"agent never-starts#0 {card['failure']}"
    await client.notify("never-starts", "ping")
    (letter,) = await read_dlq(bus, 1)
    assert header(letter, DLQ_REASON) == (
        f"handler-error: -32002 Agent unavailable: agent never-starts#0 {card['failure']}"
    )
    await asyncio.sleep(20 * GIVES_UP.backoff_max)  # restarts would show by now
    assert NeverStarts.starts == starts
    said = [r for r in caplog.records if r.name == "a2a_bus.hosting.supervisor"]
    assert sum("failed to start:" in r.getMessage() for r in said) == starts
    assert [r.getMessage() for r in said if r.levelno == logging.ERROR] == [
        f"agent never-starts#0 {card['failure']}; it is not started again"
    ]


class StartsOnce(Agent):
    """Only the first instance to start gets its backend; every later one fails."""

    agent_id = "starts-once"
    lock = threading.Lock()
    healthy_left = 1

    def on_start(self) -> None:
        with StartsOnce.lock:
            if StartsOnce.healthy_left == 0:
                raise ConnectionError("backend full")
            StartsOnce.healthy_left -= 1

    @method
    def ping(self) -> str:
        return "pong"


async def test_a_replica_that_gave_up_leaves_the_messages_to_the_others() -> None:
    """One replica of two gives up: the agent is ``degraded`` (not failed: this process
    is still ready) and every request goes to the replica that runs."""
    StartsOnce.healthy_left = 1
    bus = Bus.memory(restart_policy=GIVES_UP)
    bus.spawn(StartsOnce, 2)
    async with bus:
        await eventually(lambda: bus.hosts[0].status == "degraded")
        card = bus.directory.card("starts-once")
        assert card is not None and card["status"] == "degraded"
        assert "ConnectionError in on_start: backend full" in card["failure"]
        assert bus.directory.failed_here() == {}
        client = bus.async_client()
        answers = await asyncio.gather(
            *(client.request("starts-once", "ping", timeout=WAIT) for _ in range(20))
        )
        assert answers == ["pong"] * 20


async def test_an_agent_whose_first_start_fails_is_reported_degraded_with_why(
    new_bus: Callable[..., Bus], caplog: pytest.LogCaptureFixture
) -> None:
    """``on_start`` raising at the first start does not fail ``start()`` (the agent is
    restarted, as a backend may come back), but the agent is not reported running:
    its host and card say ``degraded`` with the error, and the log has the traceback
    naming the agent."""
    NeverStarts.starts = 0
    bus = new_bus(restart_policy=replace(QUICK, max_failed_starts=10**6))
    host = bus.spawn(NeverStarts)
    await asyncio.wait_for(bus.astart(), WAIT)
    await eventually(lambda: host.status == "degraded")
    assert host.failure == "failed to start (restarting): ConnectionError in on_start: backend down"
    card = await eventually(lambda: bus.directory.card("never-starts"))
    await eventually(lambda: bus.directory.card("never-starts")["status"] == "degraded")
    assert card["failure"] == host.failure
    # Logged by pykka as the actor stops, after the failure was reported.
    logged = await eventually(
        lambda: [r for r in caplog.records if r.name == "pykka" and r.exc_info is not None]
    )
    assert logged[0].getMessage().startswith("Unhandled exception in agent never-starts (")


ONE_START_A_MINUTE = RestartPolicy(max_retries=0, backoff_initial=60.0, backoff_max=60.0)


async def test_a_request_to_an_agent_waiting_to_restart_after_failed_starts_is_answered_at_once(
    new_bus: Callable[..., Bus],
) -> None:
    """Once more than ``max_retries`` starts in a row failed, a request that comes while
    the agent waits for its next start is answered -32002 with the start error at
    once, not held until that start (a minute away here) or the caller's timeout."""
    NeverStarts.starts = 0
    bus = new_bus(restart_policy=ONE_START_A_MINUTE)
    host = bus.spawn(NeverStarts)
    await asyncio.wait_for(bus.astart(), WAIT)
    await eventually(lambda: host.status == "degraded")
    with pytest.raises(JsonRpcError) as caught:
        await asyncio.wait_for(
            bus.async_client().request("never-starts", "ping", timeout=2 * WAIT), WAIT
        )
    assert caught.value.code == ErrorCode.AGENT_UNAVAILABLE
    assert caught.value.data == (
        "never-starts#0: the agent failed to start (1 failed starts in a row):"
        " ConnectionError in on_start: backend down"
    )
    assert NeverStarts.starts == 1


class FailsTwiceThenStarts(Agent):
    """Its backend answers from the third start on."""

    agent_id = "fails-twice"
    starts = 0

    def on_start(self) -> None:
        FailsTwiceThenStarts.starts += 1
        if FailsTwiceThenStarts.starts <= 2:
            raise ConnectionError("backend not up yet")

    @method
    def ping(self) -> str:
        return "pong"


async def test_an_agent_that_starts_after_failed_starts_is_reported_running_again() -> None:
    FailsTwiceThenStarts.starts = 0
    bus = Bus.memory(restart_policy=QUICK)
    host = bus.spawn(FailsTwiceThenStarts)
    async with bus:
        await eventually(lambda: FailsTwiceThenStarts.starts == 3 and host.status == "running")
        assert host.failure is None
        await eventually(lambda: bus.directory.card("fails-twice")["status"] == "running")
        assert await bus.async_client().request("fails-twice", "ping", timeout=WAIT) == "pong"


async def test_a_replica_restarting_after_a_failed_start_leaves_the_messages_to_the_others() -> (
    None
):
    """One replica of two fails its start and waits a minute to be started again: the
    agent is ``degraded`` and every request goes to the replica that runs."""
    StartsOnce.healthy_left = 1
    bus = Bus.memory(restart_policy=ONE_START_A_MINUTE)
    host = bus.spawn(StartsOnce, 2)
    async with bus:
        await eventually(lambda: host.status == "degraded")
        assert (
            host.failure
            == "failed to start (restarting): ConnectionError in on_start: backend full"
        )
        client = bus.async_client()
        answers = await asyncio.wait_for(
            asyncio.gather(*(client.request("starts-once", "ping") for _ in range(20))), WAIT
        )
        assert answers == ["pong"] * 20


class SlowFailingStart(Agent):
    """``on_start`` fails after a while (a connection attempt that times out)."""

    agent_id = "slow-failing-start"
    starts = 0

    def on_start(self) -> None:
        SlowFailingStart.starts += 1
        time.sleep(0.05)
        raise ConnectionError("backend down")

    @method
    def ping(self) -> str:
        return "pong"


async def test_an_agent_is_not_restarted_after_its_bus_stopped() -> None:
    """A start failure reported after the replica stopped does not start it again."""
    SlowFailingStart.starts = 0
    bus = Bus.memory(restart_policy=QUICK)
    bus.spawn(SlowFailingStart)
    await asyncio.wait_for(bus.astart(), WAIT)
    await asyncio.wait_for(bus.astop(), WAIT)
    at_stop = SlowFailingStart.starts
    await asyncio.sleep(0.5)  # many backoff periods: restarts would show by now
    assert SlowFailingStart.starts == at_stop


# -- a stop while a handler does not return ------------------------------------------


class Stuck(Agent):
    """A handler that waits without a timeout until the test lets it go."""

    agent_id = "stuck"
    entered = threading.Event()
    release = threading.Event()

    @method
    def hang(self) -> str:
        Stuck.entered.set()
        Stuck.release.wait()
        return "late"


async def test_a_stop_goes_on_without_a_handler_still_running_after_the_drain_timeout(
    new_bus: Callable[..., Bus], caplog: pytest.LogCaptureFixture
) -> None:
    """``astop`` waits ``drain_timeout`` for the running handler, then logs one warning
    naming it and returns: the request is dead-lettered and its caller answered
    -32002, and the handler's thread no longer keeps the process alive."""
    Stuck.entered.clear()
    Stuck.release.clear()
    bus = new_bus(drain_timeout=0.2)
    bus.spawn(Stuck)
    await asyncio.wait_for(bus.astart(), WAIT)
    try:
        call = asyncio.ensure_future(bus.async_client().request("stuck", "hang", timeout=WAIT))
        assert await asyncio.to_thread(Stuck.entered.wait, WAIT)
        await asyncio.wait_for(bus.astop(), WAIT)
        assert not bus.running
        with pytest.raises(JsonRpcError) as caught:
            await asyncio.wait_for(call, WAIT)
        assert caught.value.code == ErrorCode.AGENT_UNAVAILABLE
        said = [r.getMessage() for r in caplog.records if r.name == "a2a_bus.bus"]
        assert len(said) == 1
        assert "after the 0.2 s drain timeout: stuck#0 (hang)" in said[0]
        lettered = [r.getMessage() for r in caplog.records if r.name == "a2a_bus.hosting.answering"]
        assert lettered == [
            "dead letter from stuck: handler-crash: the bus stopped after waiting 0.2 s for"
            " its handler"
        ]
        assert Stuck.entered.is_set() and not Stuck.release.is_set()  # still in the handler
        assert ACTORS.count == 0
        with pytest.raises(BusStopped):
            await bus.async_client().request("stuck", "hang")
    finally:
        Stuck.release.set()


STUCK_AT_EXIT = """
import threading

from a2a_bus import Agent, Bus, method

entered = threading.Event()


class Stuck(Agent):
    agent_id = "stuck"

    @method
    def hang(self) -> str:
        entered.set()
        threading.Event().wait()
        return "never"


with Bus.memory(drain_timeout=0.2) as bus:
    bus.spawn(Stuck)
    bus.client().notify("stuck", "hang")
    assert entered.wait(30)
print("stopped")
"""


def assert_ends_stopped(script: str, warning: str) -> None:
    """``script`` run in a process of its own prints "stopped", warns ``warning`` and
    exits 0."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "stopped\n"
    assert warning in done.stderr


def test_a_process_ends_after_its_bus_stopped_with_a_handler_that_never_returns() -> None:
    """``with Bus...`` ends after the drain timeout, and the process then exits: the
    abandoned actor thread does not hold it."""
    assert_ends_stopped(STUCK_AT_EXIT, "drain timeout: stuck#0 (hang)")


INTERRUPTED_STOP = """
import os
import signal
import threading

from a2a_bus import Agent, Bus, method

# Ctrl-C raises KeyboardInterrupt here even where the test runner's shell ignores it.
signal.signal(signal.SIGINT, signal.default_int_handler)
entered = threading.Event()


class Busy(Agent):
    agent_id = "busy"

    @method
    def work(self) -> None:
        entered.set()
        threading.Event().wait()  # the stop drains it for up to its drain timeout


try:
    with Bus.memory(drain_timeout=600) as bus:
        bus.spawn(Busy)
        bus.client().notify("busy", "work")
        assert entered.wait(30)
        # The second Ctrl-C comes while the stop drains; the first is raised below.
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        raise KeyboardInterrupt
except KeyboardInterrupt:
    print("stopped")
"""


def test_a_process_ends_when_a_second_ctrl_c_interrupts_its_bus_stopping() -> None:
    """An impatient second Ctrl-C ends the drain: the actors are told to stop and the
    process exits, rather than waiting forever on actors no one stops."""
    assert_ends_stopped(INTERRUPTED_STOP, "the stop of the bus did not end: nothing is drained")


class StuckOnStop(Agent):
    """An ``on_stop`` that waits without a timeout until the test lets it go."""

    agent_id = "stuck-on-stop"
    entered = threading.Semaphore(0)
    release = threading.Event()

    def on_stop(self) -> None:
        StuckOnStop.entered.release()
        StuckOnStop.release.wait()


async def test_a_stop_goes_on_without_an_on_stop_still_running_after_the_drain_timeout(
    new_bus: Callable[..., Bus], caplog: pytest.LogCaptureFixture
) -> None:
    """Each replica's ``on_stop`` is waited for up to ``drain_timeout``, all of them
    together; then one warning names them and the stop returns, and their threads
    no longer keep the process alive. (A stop used to wait 10 s for each replica in
    turn, say nothing, and leave the process unable to exit.)"""
    StuckOnStop.release.clear()
    bus = new_bus(drain_timeout=0.2)
    bus.spawn(StuckOnStop, replicas=2)
    await asyncio.wait_for(bus.astart(), WAIT)
    try:
        await asyncio.wait_for(bus.astop(), WAIT)
        assert not bus.running
        for _ in range(2):  # both hooks ran, and neither returned
            assert await asyncio.to_thread(StuckOnStop.entered.acquire, True, WAIT)
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        said = [line for line in said if "stuck-on-stop" in line]
        assert len(said) == 1, said
        assert (
            "after the 0.2 s drain timeout: stuck-on-stop#0 (on_stop), stuck-on-stop#1 (on_stop)"
            in said[0]
        )
        assert ACTORS.count == 0
    finally:
        StuckOnStop.release.set()


async def test_an_on_stop_that_hangs_after_the_drain_timeout_passed_is_bounded_too(
    new_bus: Callable[..., Bus], caplog: pytest.LogCaptureFixture
) -> None:
    """Agents stop one after the other: an agent whose stop begins once the drain
    timeout has passed (here, behind a handler that never returns) still has its
    ``on_stop`` waited for ``drain_timeout`` at most, with a warning naming it."""
    Stuck.entered.clear()
    Stuck.release.clear()
    StuckOnStop.release.clear()
    bus = new_bus(drain_timeout=0.2)
    bus.spawn(Stuck)
    bus.spawn(StuckOnStop)
    await asyncio.wait_for(bus.astart(), WAIT)
    try:
        await bus.async_client().notify("stuck", "hang")
        assert await asyncio.to_thread(Stuck.entered.wait, WAIT)
        await asyncio.wait_for(bus.astop(), WAIT)
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("drain timeout: stuck#0 (hang)" in line for line in said), said
        assert any(
            "stuck-on-stop#0: on_stop still running after the 0.2 s drain timeout" in line
            for line in said
        ), said
        assert ACTORS.count == 0
    finally:
        Stuck.release.set()
        StuckOnStop.release.set()


STUCK_ON_STOP_AT_EXIT = """
import threading

from a2a_bus import Agent, Bus


class Stuck(Agent):
    agent_id = "stuck"

    def on_stop(self) -> None:
        threading.Event().wait()


with Bus.memory(drain_timeout=0.2) as bus:
    bus.spawn(Stuck)
print("stopped")
"""


def test_a_process_ends_after_its_bus_stopped_with_an_on_stop_that_never_returns() -> None:
    assert_ends_stopped(STUCK_ON_STOP_AT_EXIT, "drain timeout: stuck#0 (on_stop)")


class StuckOnStart(Agent):
    """An ``on_start`` that waits without a timeout until the test lets it go."""

    agent_id = "stuck-on-start"
    entered = threading.Event()
    release = threading.Event()

    def on_start(self) -> None:
        StuckOnStart.entered.set()
        StuckOnStart.release.wait()

    @method
    def ping(self) -> str:
        return "pong"


@pytest.mark.parametrize("requests", [0, 1], ids=["idle", "request-held"])
async def test_a_stop_names_an_on_start_still_running_after_the_drain_timeout(
    new_bus: Callable[..., Bus], caplog: pytest.LogCaptureFixture, requests: int
) -> None:
    """An ``on_start`` that never returns holds a stop ``drain_timeout`` at most, and
    the warning names that hook, ahead of the requests held behind it (``on_stop``
    never ran); a held request is answered -32002."""
    StuckOnStart.entered.clear()
    StuckOnStart.release.clear()
    bus = new_bus(drain_timeout=0.5)
    bus.spawn(StuckOnStart)
    await asyncio.wait_for(bus.astart(), WAIT)  # does not wait for on_start
    try:
        assert await asyncio.to_thread(StuckOnStart.entered.wait, WAIT)
        client = bus.async_client()
        calls = [
            asyncio.ensure_future(client.request("stuck-on-start", "ping", timeout=WAIT))
            for _ in range(requests)
        ]
        if calls:
            await eventually(lambda: bus.hosts[0].holding(), "the request to be held")
        await asyncio.wait_for(bus.astop(), WAIT)
        for call in calls:
            with pytest.raises(JsonRpcError) as caught:
                await asyncio.wait_for(call, WAIT)
            assert caught.value.code == ErrorCode.AGENT_UNAVAILABLE
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        said = [line for line in said if "drain timeout" in line]
        held = "on_start, ping" if calls else "on_start"
        assert len(said) == 1, said
        assert f"after the 0.5 s drain timeout: stuck-on-start#0 ({held})" in said[0]
        assert ACTORS.count == 0
    finally:
        StuckOnStart.release.set()


async def test_an_on_start_still_running_when_its_stop_begins_late_is_named_too(
    new_bus: Callable[..., Bus], caplog: pytest.LogCaptureFixture
) -> None:
    """An agent whose stop begins once the drain timeout has passed (behind a handler
    that never returns) waits ``drain_timeout`` at most for an ``on_start`` that never
    returns, with a warning naming that hook."""
    Stuck.entered.clear()
    Stuck.release.clear()
    StuckOnStart.entered.clear()
    StuckOnStart.release.clear()
    bus = new_bus(drain_timeout=0.2)
    bus.spawn(Stuck)
    bus.spawn(StuckOnStart)
    await asyncio.wait_for(bus.astart(), WAIT)
    try:
        await bus.async_client().notify("stuck", "hang")
        assert await asyncio.to_thread(Stuck.entered.wait, WAIT)
        assert await asyncio.to_thread(StuckOnStart.entered.wait, WAIT)
        await asyncio.wait_for(bus.astop(), WAIT)
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any(
            "stuck-on-start#0: on_start still running after the 0.2 s drain timeout" in line
            for line in said
        ), said
        assert ACTORS.count == 0
    finally:
        Stuck.release.set()
        StuckOnStart.release.set()


# -- a handler that stops its own bus -------------------------------------------------


class Stopper(Agent):
    """A handler that shuts the service down (an admin ``shutdown`` method)."""

    agent_id = "stopper"
    bus: Bus | None = None
    raised: list[BaseException] = []

    @method
    def shutdown(self) -> str:
        assert Stopper.bus is not None
        try:
            Stopper.bus.stop()
        except RuntimeError as exc:
            Stopper.raised.append(exc)
            return f"refused: {type(exc).__name__}"
        return "stopped"


def test_stopping_the_bus_from_its_own_handler_is_refused_at_once() -> None:
    """``stop()`` waits for the bus's handlers, so in one of them it would wait for
    itself: it raises RuntimeError at once instead; the caller is answered, and the
    bus stops normally from outside."""
    bus = Bus.memory()
    Stopper.bus = bus
    Stopper.raised = []
    bus.spawn(Stopper)
    bus.start()
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(bus.client().request("stopper", "shutdown", timeout=3))
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(WAIT)

    def stop() -> None:
        with contextlib.suppress(BusStopped):  # raised when the cleanup below drops the loop
            bus.stop()

    stopper = threading.Thread(target=stop, daemon=True)
    stopper.start()
    stopper.join(WAIT)
    wedged = stopper.is_alive()
    if wedged:  # release the actor thread blocked in stop(), then drop the loop
        bus._stop_thread()
        stopper.join(WAIT)
    assert not wedged, "bus.stop() hung after a handler called it"
    assert outcome == ["refused: RuntimeError"]
    assert "from a handler of this bus" in str(Stopper.raised[0])
    assert not bus.running


def test_stopping_the_bus_from_its_own_loop_is_refused_at_once() -> None:
    """Sync ``stop()`` in a coroutine on the bus loop would block that loop: refused,
    as other blocking calls on the loop are."""
    bus = Bus.memory().start()
    try:

        async def stop_on_the_loop() -> str:
            try:
                bus.stop()
            except RuntimeError as exc:
                return str(exc)
            return "stopped"

        answer = asyncio.run_coroutine_threadsafe(stop_on_the_loop(), bus.loop).result(WAIT)
        assert answer.startswith("blocking call on the bus loop")
        assert bus.running
    finally:
        bus.stop()
    assert not bus.running


# -- spawn on a running bus that fails ------------------------------------------------


async def test_a_spawn_that_fails_on_a_running_bus_does_not_advertise_the_agent(
    new_bus: Callable[..., Bus],
) -> None:
    """A host that failed to start is forgotten: not in ``bus.hosts``, not announced
    by the heartbeat, not in ``methods/list``, and a request to it is told at once
    that the agent is not there (-32002), not left to wait for its timeout."""
    bus = new_bus(heartbeat=0.05)
    await asyncio.wait_for(bus.astart(), WAIT)
    with pytest.raises(RuntimeError, match="configuration missing"):
        await asyncio.wait_for(bus.aspawn(BrokenConstructor), WAIT)
    assert bus.hosts == []
    await asyncio.sleep(0.3)  # a few heartbeats: what the announcer says is in the directory
    client = bus.async_client()
    listed = await client.request(None, "methods/list", timeout=WAIT)
    assert "broken-constructor" not in {entry["agent"] for entry in listed["methods"]}
    with pytest.raises(JsonRpcError) as caught:
        await client.request("broken-constructor", "ping", timeout=WAIT)
    assert caught.value.code == ErrorCode.AGENT_UNAVAILABLE


def test_a_sync_spawn_that_fails_on_a_running_bus_leaves_the_bus_serving() -> None:
    """The same from sync code, with an agent that did start next to it."""
    bus = Bus.memory(heartbeat=0.05)
    with bus:
        bus.spawn(Fine)
        with pytest.raises(RuntimeError, match="configuration missing"):
            bus.spawn(BrokenConstructor)
        assert [host.agent_id for host in bus.hosts] == ["fine"]
        time.sleep(0.3)
        client = bus.client()
        listed = {entry["agent"] for entry in client.request(None, "methods/list")["methods"]}
        assert listed == {"fine"}
        with pytest.raises(JsonRpcError) as caught:
            client.request("broken-constructor", "ping", timeout=2)
        assert caught.value.code == ErrorCode.AGENT_UNAVAILABLE
        assert client.request("fine", "ping") == "pong"


# -- calls on a stopped bus -------------------------------------------------------------

PING = {"jsonrpc": "2.0", "method": "ping", "params": {"_agentId": "fine"}, "id": 1}
SYNC_CALLS: dict[str, Callable[[Client], object]] = {
    "request": lambda c: c.request("fine", "ping"),
    "notify": lambda c: c.notify("fine", "ping"),
    "publish": lambda c: c.publish("orders.eu", {}),
    "read": lambda c: c.read("orders.eu"),
    "call": lambda c: c.call(PING),
    "batch": lambda c: c.batch([Call("fine", "ping")]),
    "stream": lambda c: list(c.stream("fine", "ping")),
    "stream_to": lambda c: c.stream_to("fine", "ping", [1]),
}


async def _all(items: AsyncIterator[object]) -> list[object]:
    return [item async for item in items]


ASYNC_CALLS: dict[str, Callable[[AsyncClient], Awaitable[object]]] = {
    "request": lambda c: c.request("fine", "ping"),
    "notify": lambda c: c.notify("fine", "ping"),
    "publish": lambda c: c.publish("orders.eu", {}),
    "read": lambda c: c.read("orders.eu"),
    "call": lambda c: c.call(PING),
    "call_event": lambda c: c.call_event(new_event({"source": "t", "type": "t", "subject": "a"})),
    "batch": lambda c: c.batch([Call("fine", "ping")]),
    "stream": lambda c: _all(c.stream("fine", "ping")),
    "call_stream": lambda c: _all(c.call_stream(PING)),
    "stream_to": lambda c: c.stream_to("fine", "ping", [1]),
}


@pytest.mark.parametrize("call", SYNC_CALLS, ids=str)
def test_a_sync_call_on_a_stopped_bus_raises_bus_stopped(call: str) -> None:
    bus = Bus.memory()
    bus.spawn(Fine)
    with bus:
        client = bus.client()
    with pytest.raises(BusStopped, match="the bus is not running"):
        SYNC_CALLS[call](client)


@pytest.mark.parametrize("call", ASYNC_CALLS, ids=str)
async def test_an_async_call_on_a_stopped_bus_raises_bus_stopped(call: str) -> None:
    """After ``async with bus`` on this loop: no "transport not started", and no
    "Method not found" from a bus that no longer knows its agents."""
    bus = Bus.memory()
    bus.spawn(Fine)
    async with bus:
        client = bus.async_client()
    with pytest.raises(BusStopped, match="the bus is not running"):
        await ASYNC_CALLS[call](client)


@pytest.mark.parametrize("call", ASYNC_CALLS, ids=str)
def test_a_call_from_another_loop_after_the_bus_loop_closed_raises_bus_stopped(
    call: str,
) -> None:
    """The bus's loop ended without a stop (``asyncio.run`` returned): a call from
    another loop raises BusStopped, not "Event loop is closed"."""
    bus = Bus.memory()
    bus.spawn(Fine)
    asyncio.run(bus.astart())
    try:
        assert not bus.running
        client = bus.async_client()

        async def attempt() -> None:
            with pytest.raises(BusStopped, match="the bus is not running"):
                await ASYNC_CALLS[call](client)

        asyncio.run(attempt())
        with pytest.raises(BusStopped, match="the bus is not running"):
            SYNC_CALLS["request"](bus.client())
        with pytest.raises(BusStopped, match="the bus is not running"):
            bus.spawn(Fine)
    finally:
        pykka.ActorRegistry.stop_all(block=True, timeout=WAIT)


class Waiting(Agent):
    """Holds each call until the test lets it go."""

    agent_id = "waiting"
    entered = threading.Event()
    release = threading.Event()

    @method
    def wait(self) -> str:
        Waiting.entered.set()
        Waiting.release.wait(30)
        return "done"


def test_a_bus_whose_loop_ended_without_a_stop_is_not_running_and_its_stop_ends_it() -> None:
    """The loop stopped from inside: a call that was waiting is woken with BusStopped
    (before any stop), ``running`` turns false, a call raises BusStopped, ``stop()``
    returns (telling the actors to stop), and a start says the bus cannot start again."""
    bus = Bus.memory()
    bus.spawn(Fine)
    bus.start()
    assert bus.client().request("fine", "ping") == "pong"
    Waiting.entered.clear()
    Waiting.release.clear()
    bus.spawn(Waiting)
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(bus.client().request("waiting", "wait"))
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    try:
        assert Waiting.entered.wait(WAIT)
        bus.loop.call_soon_threadsafe(bus.loop.stop)
        deadline = time.monotonic() + WAIT
        while bus.running and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not bus.running
        caller.join(WAIT)
        assert len(outcome) == 1 and isinstance(outcome[0], BusStopped)
        with pytest.raises(BusStopped):
            bus.client().request("fine", "ping")
        bus.stop()
        Waiting.release.set()
        deadline = time.monotonic() + WAIT
        while live_actors() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert live_actors() == []
        with pytest.raises(BusStopped, match="cannot start again"):
            bus.start()
    finally:
        Waiting.release.set()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"heartbeat": 0}, ValueError),  # would announce cards in a tight loop
        ({"heartbeat": -1}, ValueError),
        ({"heartbeat": math.inf}, ValueError),
        ({"heartbeat": "5"}, TypeError),  # its task died silently, then stop() raised
        ({"request_timeout": 0}, ValueError),  # every later call failed, blaming the call
        ({"request_timeout": math.nan}, ValueError),
        ({"request_timeout": "5"}, TypeError),
        ({"registry_timeout": -1}, ValueError),
        ({"drain_timeout": -1}, ValueError),
        ({"drain_timeout": "5"}, TypeError),
        ({"card_ttl": 0}, ValueError),
        ({"partitions": 0}, ValueError),  # ZeroDivisionError at the first write
        ({"retention": 0}, ValueError),
    ],
)
def test_bus_options_that_cannot_work_are_refused_when_the_bus_is_made(
    options: dict[str, Any], error: type[Exception]
) -> None:
    name = next(iter(options))
    with pytest.raises(error, match=name):
        Bus.memory(**options)
    assert Bus.memory(request_timeout=math.inf).context.request_timeout == math.inf
    assert Bus.memory(registry_timeout=0).registry_timeout == 0  # a start that does not wait
    assert Bus.memory(drain_timeout=0).drain_timeout == 0  # a stop that does not wait


def test_a_bus_waits_its_transports_drain_timeout_unless_told_otherwise() -> None:
    """One setting bounds a Kafka bus's whole stop: the transport's, unless the bus
    is given its own; 10 s in memory."""
    assert Bus.memory().drain_timeout == 10.0
    assert Bus.kafka("127.0.0.1:9", drain_timeout=3).drain_timeout == 3
    own = Bus.kafka("127.0.0.1:9", bus_options={"drain_timeout": 1}, drain_timeout=3)
    assert own.drain_timeout == 1


def test_bus_options_given_to_bus_kafka_as_kafka_settings_are_named_with_where_they_go() -> None:
    """``Bus.memory(prefix=...)`` takes the bus's options; ``Bus.kafka`` takes Kafka
    settings, so the same keywords there say to pass them as ``bus_options``."""
    with pytest.raises(TypeError) as misplaced:
        Bus.kafka("127.0.0.1:9", prefix="orders", heartbeat=2, linger_ms=5)
    assert "got heartbeat=..., prefix=...: options of the bus, not Kafka settings" in str(
        misplaced.value
    )
    assert "bus_options={'heartbeat': ..., 'prefix': ...}" in str(misplaced.value)
    assert Bus.kafka("127.0.0.1:9", bus_options={"prefix": "orders"}).topics.prefix == "orders"


async def test_stop_of_a_bus_started_with_astart_says_to_await_astop() -> None:
    """It used to return at once and leave the bus running (its actors too)."""
    bus = Bus.memory()
    await bus.astart()
    with pytest.raises(RuntimeError, match=r"started with astart\(\): stop it with await"):
        bus.stop()
    assert bus.running
    await bus.astop()
    assert not bus.running
    bus.stop()  # stopped: nothing to do


async def test_one_agent_id_is_hosted_once_per_bus() -> None:
    """Two hosts of one id would share its inbox, each taking the other's calls."""

    class Other(Agent):
        agent_id = "fine"

    bus = Bus.memory()
    bus.spawn(Fine)
    for cls in (Fine, Other):
        with pytest.raises(ValueError, match="'fine' is hosted on this bus already"):
            bus.spawn(cls)
    async with bus:
        with pytest.raises(ValueError, match="hosted on this bus already"):
            await bus.aspawn(Other)
        assert await bus.async_client().request("fine", "ping") == "pong"


def test_a_spawn_on_a_stopped_bus_is_started_with_it_again() -> None:
    """A stopped bus can start again: a spawn in between is recorded, not refused."""
    bus = Bus.memory()
    with bus:
        pass
    bus.spawn(Fine)
    with bus:
        assert bus.client().request("fine", "ping") == "pong"


def test_sync_call_after_stop_is_bus_stopped_and_a_restart_serves_again() -> None:
    bus = Bus.memory()
    client = bus.start().client()
    bus.stop()
    with pytest.raises(BusStopped, match="not running"):
        client.request(None, "methods/list")
    with bus:
        assert client.request(None, "methods/list") == {"methods": []}


def test_sync_call_before_start_is_bus_stopped_without_a_stray_coroutine() -> None:
    bus = Bus.memory()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(BusStopped, match="not running"):
            bus.client().request(None, "methods/list")
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]


class Held(Agent):
    """Holds each call until the test lets it go."""

    agent_id = "held"
    entered = threading.Event()
    release = threading.Event()

    @method
    def wait(self) -> str:
        Held.entered.set()
        Held.release.wait(30)
        return "done"


def test_a_sync_call_whose_loop_goes_away_gets_bus_stopped_not_a_hang() -> None:
    bus = Bus.memory().start()
    bus.spawn(Held)
    outcome: list[BaseException | str] = []

    def call() -> None:
        try:
            outcome.append(bus.client().request("held", "wait"))
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)  # a regression must not hang pytest
    caller.start()
    assert Held.entered.wait(10)
    # The loop ends without the drain of stop() (as when its thread dies): the
    # caller's request can never be answered now.
    bus._stop_thread()
    caller.join(10)
    Held.release.set()
    for host in bus.hosts:
        for replica in host.replicas:
            assert replica._actor is not None
            replica._actor.stop()
    assert not caller.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], BusStopped)
