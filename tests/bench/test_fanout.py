"""The in-memory fan-out benchmark: arrivals counted across actor threads, its
report and curves, and a real run in which every subscriber's handler runs."""

from __future__ import annotations

import asyncio
import threading

import pytest

from a2a_bus.bench.fanout import Arrivals, FanOut, events_at, measure, report

FOUND = {
    "bus": {1: FanOut(100.0, 90.0), 10: FanOut(500.0, 400.0), 100: FanOut(6000.0, 5040.0)},
    "floor": {1: FanOut(50.0, 40.0), 10: FanOut(250.0, 200.0), 100: FanOut(3000.0, 2020.0)},
}


async def test_an_event_is_done_once_every_expected_handler_arrived_from_its_thread() -> None:
    arrivals = Arrivals(asyncio.get_running_loop())
    done = arrivals.expect(5)
    threads = [threading.Thread(target=arrivals.arrived) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    await asyncio.sleep(0.05)
    assert not done.done()  # four of five
    threading.Thread(target=arrivals.arrived).start()
    await asyncio.wait_for(done, 5)
    again = arrivals.expect(1)  # the next event counts from zero
    arrivals.arrived()
    await asyncio.wait_for(again, 5)


def test_fewer_events_are_sent_as_each_reaches_more_subscribers() -> None:
    counts = [events_at(n, quick=False) for n in (1, 100, 1000, 100_000)]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[2]
    assert counts[-1] == 20  # never fewer


def test_the_report_sets_the_bus_beside_the_floor_at_each_count_with_the_slope() -> None:
    out = report(FOUND)
    rows = {row.case: row for row in out.rows}
    assert rows["100 subscribers: publish to last handler run, p50"].ratio == 2.0
    assert {curve.name for curve in out.curves} == {"fanout-p50", "fanout-cpu"}
    cpu = next(curve for curve in out.curves if curve.name == "fanout-cpu")
    assert [(p.x, p.y) for p in cpu.series["floor"]] == [(1, 40.0), (10, 200.0), (100, 2020.0)]
    assert any("bus 50.0 us, floor 20.0 us" in note for note in out.notes)


@pytest.mark.timeout(120)
async def test_every_subscriber_runs_for_every_event_on_the_bus_and_on_the_floor() -> None:
    found = await measure((1, 12), quick=True)
    for path in ("bus", "floor"):
        assert set(found[path]) == {1, 12}
        assert all(fan.p50_us > 0 and fan.cpu_us > 0 for fan in found[path].values())
