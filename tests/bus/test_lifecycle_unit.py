"""Calls on a bus that is not running fail with BusStopped, whatever the state."""

from __future__ import annotations

import gc
import threading
import warnings

import pytest

from a2a_bus import Agent, Bus, BusStopped, method


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
