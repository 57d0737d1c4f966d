"""Bus lifecycles under stress: a start that fails half way, a stop while an agent
crash-loops, an agent restarted after its bus stopped, a handler that stops its bus.

Each test fails on the code it was written against and passes once the bug is fixed.
Every await and join has a timeout, and what a bug leaves behind (actor threads,
a wedged loop) is cleaned up so the rest of the suite is unaffected.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

import pykka
import pytest

from a2a_bus import Agent, Bus, RestartPolicy, method
from a2a_bus.errors import BusStopped, JsonRpcError
from a2a_bus.protocol import ErrorCode

WAIT = 10.0
QUICK = RestartPolicy(max_retries=2, backoff_initial=0.005, backoff_max=0.02)


@pytest.fixture(autouse=True)
def no_actor_left() -> Iterator[None]:
    """pykka threads are not daemons: one a bug leaks would keep pytest from exiting."""
    yield
    pykka.ActorRegistry.stop_all(block=True, timeout=WAIT)


def live_actors() -> list[pykka.ActorRef[pykka.Actor]]:
    """Actors still running (the autouse fixture leaves none from earlier tests)."""
    return [ref for ref in pykka.ActorRegistry.get_all() if ref.is_alive()]


class Fine(Agent):
    agent_id = "fine"

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
    """Bug: ``Bus.start()`` (bus.py ``start``) catches a failure of ``astart`` and only
    stops the loop thread; ``astart`` had set ``_running = True`` and started the
    agents spawned before the failing one, so their pykka actor threads stay alive
    (never stopped, no ``on_stop``) and ``bus.running`` says True on a bus whose loop
    is gone. Correct: a start that raises leaves nothing running (the agents started
    so far are stopped, the transport is stopped) and ``bus.running`` is False.
    """
    bus = Bus.memory()
    bus.spawn(Fine)
    bus.spawn(BrokenConstructor)
    with pytest.raises(RuntimeError, match="configuration missing"):
        bus.start()
    assert live_actors() == []
    assert not bus.running


async def test_an_async_start_that_fails_leaves_the_bus_stopped() -> None:
    """Bug: ``astart`` sets ``_running = True`` before it starts the hosts; when one
    host fails (its agent's constructor raises) the exception leaves ``async with bus``
    at ``__aenter__`` (so ``__aexit__`` never runs) with the earlier agents' actors
    running, the transport started and ``bus.running`` True: a later ``astart`` is a
    no-op and ``astop`` is the only way out. Correct: ``astart`` undoes what it did
    when it raises — the started agents stopped, ``bus.running`` False.
    """
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


async def test_astop_returns_while_an_agent_crash_loops_in_on_start_with_a_request_held() -> None:
    """Bug: a request to an agent whose ``on_start`` keeps failing is held by its
    replica forever (supervisor.py: a start failure restarts the actor but never
    counts against ``max_retries``, so the job is neither run nor dead-lettered).
    The caller times out, but ``Replica.stop`` waits ``while self._outstanding`` for
    that job, so ``bus.astop()`` never returns. Correct: ``astop`` returns (the held
    job is ended — answered with an error or dead-lettered — when the replica stops).
    """
    bus = Bus.memory(restart_policy=QUICK)
    bus.spawn(NeverStarts)
    await asyncio.wait_for(bus.astart(), WAIT)
    client = bus.async_client()
    with pytest.raises(JsonRpcError):
        await asyncio.wait_for(client.request("never-starts", "ping", timeout=0.3), WAIT)
    stopping = asyncio.ensure_future(bus.astop())
    done, _ = await asyncio.wait({stopping}, timeout=WAIT)
    if not done:
        stopping.cancel()
    assert done, "astop() hung waiting for a job the crash-looping agent never runs"


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
    """Bug: ``Replica.stop`` (supervisor.py) cancels a pending restart and stops the
    current actor, but a start failure reported after that (``_on_start_failure``
    -> ``_crashed``) schedules a new restart: the agent is started again and again
    after ``astop()`` returned, for as long as the loop runs (new actor threads, new
    agent instances, ``on_start`` side effects on a stopped bus). Correct: once the
    replica stopped, no actor of it is started again.
    """
    SlowFailingStart.starts = 0
    bus = Bus.memory(restart_policy=QUICK)
    bus.spawn(SlowFailingStart)
    await asyncio.wait_for(bus.astart(), WAIT)
    await asyncio.wait_for(bus.astop(), WAIT)
    at_stop = SlowFailingStart.starts
    await asyncio.sleep(0.5)  # many backoff periods: restarts would show by now
    assert SlowFailingStart.starts == at_stop


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
        except BaseException as exc:  # a clear refusal is a correct outcome too
            Stopper.raised.append(exc)
            return f"refused: {type(exc).__name__}"
        return "stopped"


def test_stopping_the_bus_from_its_own_handler_does_not_deadlock() -> None:
    """Bug: ``Bus.stop()`` called in a handler (the actor thread) blocks on
    ``astop``, which drains the replica — waiting for this very handler to return.
    The handler never returns, the caller only gets its timeout, and the bus is
    wedged: ``running`` stays True and a second ``stop()`` hangs as well. Correct:
    either ``stop()`` from a handler raises a clear error at once (as blocking calls
    on the loop do) or it stops the bus without waiting for the calling handler;
    in both cases the caller is answered and the bus can be stopped.
    """
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
    assert outcome and not isinstance(outcome[0], JsonRpcError), outcome
    assert not bus.running


# -- spawn on a running bus that fails ------------------------------------------------


def test_a_spawn_that_fails_on_a_running_bus_does_not_advertise_the_agent() -> None:
    """Bug: ``Bus._start_host`` appends the host to ``bus.hosts`` before starting it
    and leaves it there when the start raises. ``spawn`` raises to the user, but the
    announcer's heartbeat (``_cards`` reads ``bus.hosts``) keeps announcing the
    agent: ``methods/list`` lists its methods, and a request to it is routed to an
    inbox nobody reads, so the caller waits for its whole timeout (-32001) instead of
    being told at once that the agent is not there (-32002 "Agent not found").
    Correct: a host that failed to start is forgotten — not listed, not announced.
    """
    bus = Bus.memory(heartbeat=0.05)
    with bus:
        with pytest.raises(RuntimeError, match="configuration missing"):
            bus.spawn(BrokenConstructor)
        time.sleep(0.3)  # a few heartbeats: what the announcer says is in the directory
        client = bus.client()
        listed = {entry["agent"] for entry in client.request(None, "methods/list")["methods"]}
        assert "broken-constructor" not in listed
        with pytest.raises(JsonRpcError) as caught:
            client.request("broken-constructor", "ping", timeout=2)
        assert caught.value.code == ErrorCode.AGENT_UNAVAILABLE
