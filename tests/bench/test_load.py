"""Load on a benchmark path: every level of callers in flight is measured for every
path, records per fetch are counted for the paths that count their fetches, the
ratios of two paths taking turns are summed up round by round, and a benchmark's
actors are stopped without blocking its loop."""

from __future__ import annotations

import asyncio
import time

import pykka

from a2a_bus.bench.load import (
    IN_FLIGHT_LEVELS,
    Sizes,
    cpu_by_in_flight,
    many_in_flight,
    round_spread,
    stop_actors,
    throughput,
)


async def test_cpu_by_in_flight_measures_every_level_of_every_path() -> None:
    calls = {"fast": 0, "slow": 0}

    async def fast() -> None:
        calls["fast"] += 1
        await asyncio.sleep(0)

    async def slow() -> None:
        calls["slow"] += 1
        sum(range(2000))  # CPU the process spends per request
        await asyncio.sleep(0)

    # 0.1 s a level and path: a stall of the loop (a collection, a thread done with
    # an earlier test) must not leave a level without requests.
    found = await cpu_by_in_flight({"fast": fast, "slow": slow}, Sizes(1, 0.8, 1))
    assert set(found) == {"fast", "slow"}
    assert list(found["fast"]) == list(IN_FLIGHT_LEVELS) == list(found["slow"])
    assert all(us > 0 for costs in found.values() for us in costs.values())
    assert calls["fast"] > 0 and calls["slow"] > 0
    assert found["slow"][16] > found["fast"][16]


async def test_a_run_whose_time_is_up_before_its_callers_start_still_measures_a_rate() -> None:
    """Each caller makes one request at least: a loop that starts the callers late
    leaves no level of a benchmark without requests."""
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)

    rate = await throughput(call, 4, 0.0)
    assert calls == 4
    assert rate > 0


def test_the_spread_of_two_paths_ratios_is_paired_round_by_round() -> None:
    """Median, middle half and extremes of path / baseline, for throughput and CPU."""
    bus_rounds = [(600.0, 120.0), (1000.0, 110.0), (800.0, 100.0), (700.0, 130.0), (900.0, 140.0)]
    assert round_spread(bus_rounds, [(1000.0, 100.0)] * 5) == (
        "throughput median 0.80x, middle half 0.70-0.90x, all 0.60-1.00x; "
        "CPU per request median 1.20x, middle half 1.10-1.30x, all 1.00-1.40x"
    )
    # One round: its ratios alone.
    assert round_spread([(900.0, 110.0)], [(1000.0, 100.0)]) == (
        "throughput 0.90x; CPU per request 1.10x"
    )


async def test_records_per_fetch_are_counted_while_the_path_is_loaded_and_only_then() -> None:
    """What a path fetched before and between its turns is not its load's."""
    fetched = {"fetches": 0, "records": 0}

    async def counted() -> None:  # every request arrives in a fetch of four records
        fetched["records"] += 1
        if fetched["records"] % 4 == 0:
            fetched["fetches"] += 1
        await asyncio.sleep(0)

    async def other() -> None:
        fetched["fetches"] += 1000  # fetches of someone else, between the turns
        await asyncio.sleep(0)

    found = await many_in_flight(
        {"counted": counted, "other": other},
        Sizes(1, 0.2, 1),
        {"counted": lambda: (fetched["fetches"], fetched["records"])},
    )
    assert 3.5 < found["counted"]["records_per_fetch"] <= 4.5
    assert "records_per_fetch" not in found["other"]
    assert found["counted"]["rps_many"] > 0


async def test_how_busy_a_path_kept_the_process_is_its_cpu_over_its_wall_time() -> None:
    """A path that waits most of each request keeps the process less busy than one
    that computes, and throughput times CPU per request is that busy share."""

    async def computing() -> None:
        sum(range(20_000))

    async def waiting() -> None:
        await asyncio.sleep(0.01)

    found = await many_in_flight({"computing": computing, "waiting": waiting}, Sizes(1, 0.4, 1))
    assert found["waiting"]["busy"] < found["computing"]["busy"]
    for figures in found.values():
        assert figures["busy"] > 0
        rate_times_cost = figures["rps_many"] * figures["cpu_us"] / 1e6
        assert abs(rate_times_cost - figures["busy"]) < 1e-6 * max(1.0, figures["busy"])


async def test_actors_are_stopped_while_the_loop_goes_on() -> None:
    class Slow(pykka.ThreadingActor):
        def on_stop(self) -> None:
            time.sleep(0.3)

    actors = [Slow.start() for _ in range(3)]
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticking = asyncio.create_task(tick())
    await asyncio.sleep(0)
    before = ticks
    await stop_actors(actors)
    ticking.cancel()
    assert not any(actor.is_alive() for actor in actors)
    assert ticks - before >= 5  # the loop ran while the actors stopped
