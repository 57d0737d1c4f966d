"""Keeping the bus's threads on one CPU (off unless asked)."""

from __future__ import annotations

import asyncio
import os

import pytest

from a2a_bus import Agent, Bus, method
from a2a_bus.runtime.affinity import ENV, choose_cpu, current_cpu

ALLOWED = sorted(os.sched_getaffinity(0))


class Where(Agent):
    agent_id = "where"

    @method
    def cpus(self) -> list[int]:
        return sorted(os.sched_getaffinity(0))  # this actor thread's CPUs

    @method
    def policy(self) -> int:
        return os.sched_getscheduler(0)  # this actor thread's scheduling policy

    @method
    def cpu(self) -> int | None:
        return current_cpu()


async def _loop_cpus() -> set[int]:
    return os.sched_getaffinity(0)  # the thread running the loop


async def _loop_policy() -> int:
    return os.sched_getscheduler(0)


def test_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert choose_cpu() is None
    assert choose_cpu("off") is None


def test_auto_and_numbers_name_an_allowed_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose_cpu("auto") in ALLOWED
    assert choose_cpu(str(ALLOWED[-1])) == ALLOWED[-1]
    monkeypatch.setenv(ENV, str(ALLOWED[0]))
    assert choose_cpu() == ALLOWED[0]


@pytest.mark.parametrize("bad", ["fast", str(max(ALLOWED) + 1), -1])
def test_a_bad_setting_is_refused_with_the_allowed_cpus(bad: str | int) -> None:
    with pytest.raises(ValueError, match=ENV):
        choose_cpu(bad)


def test_pinned_bus_keeps_its_loop_and_actors_on_one_cpu() -> None:
    cpu = ALLOWED[-1]
    before = os.sched_getaffinity(0)
    with Bus.memory(pin_cpu=cpu) as bus:
        bus.spawn(Where)
        assert bus.client().request("where", "cpus") == [cpu]
        assert asyncio.run_coroutine_threadsafe(_loop_cpus(), bus.loop).result() == {cpu}
    assert os.sched_getaffinity(0) == before  # the caller's thread is left alone


def test_pinned_bus_threads_do_not_preempt_each_other_on_waking() -> None:
    with Bus.memory(pin_cpu=ALLOWED[-1]) as bus:
        bus.spawn(Where)
        assert bus.client().request("where", "policy") == os.SCHED_BATCH
        assert asyncio.run_coroutine_threadsafe(_loop_policy(), bus.loop).result() == (
            os.SCHED_BATCH
        )
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the caller's thread is left alone


def test_unpinned_bus_threads_keep_the_process_cpus() -> None:
    with Bus.memory(pin_cpu="off") as bus:
        bus.spawn(Where)
        assert bus.client().request("where", "cpus") == ALLOWED
        assert bus.client().request("where", "policy") == os.SCHED_OTHER


async def test_async_bus_pins_the_loop_thread_it_starts_on() -> None:
    cpu = ALLOWED[0]
    before = os.sched_getaffinity(0)
    policy = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        async with Bus.memory(pin_cpu=cpu) as bus:
            await bus.aspawn(Where)
            assert os.sched_getaffinity(0) == {cpu}
            assert await bus.async_client().request("where", "cpus") == [cpu]
    finally:  # this test's thread runs the others too
        os.sched_setaffinity(0, before)
        os.sched_setscheduler(0, *policy)


def test_the_current_cpu_of_a_pinned_thread_is_its_cpu() -> None:
    """Read where it can be (Linux), and then one the thread may run on: on a
    pinned bus, the one CPU of its threads."""
    here = current_cpu()
    assert here is None or here in ALLOWED
    if here is None:
        return
    for cpu in ALLOWED:
        with Bus.memory(pin_cpu=cpu) as bus:
            bus.spawn(Where)
            assert bus.client().request("where", "cpu") == cpu
