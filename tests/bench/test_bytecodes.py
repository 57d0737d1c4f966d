"""The bytecode-counting benchmark: where a function's code lives, what the counter
counts (and in which threads), the report of the paths' counts by package, and a
real count of every path on a broker."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from a2a_bus.bench.bytecodes import BytecodeCounter, Counted, measure, package_of, report
from a2a_bus.bench.report import quiet


def test_code_is_placed_in_its_subpackage_of_the_project_or_its_package() -> None:
    assert package_of("/src/a2a_bus/transport/kafka/keys.py") == "a2a_bus/transport/kafka"
    assert package_of("/src/a2a_bus/core/dispatch.py") == "a2a_bus/core"
    assert package_of("/src/a2a_bus/bus.py") == "a2a_bus/bus.py"
    assert package_of("/venv/lib/python3.11/site-packages/aiokafka/conn.py") == "aiokafka"
    assert package_of("/venv/lib/python3.11/site-packages/six.py") == "six"
    assert package_of(asyncio.__file__) == "asyncio"
    assert package_of(threading.__file__) == "stdlib"
    assert package_of("<string>") == "generated"
    assert package_of("/elsewhere/script.py") == "other"


def _loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def test_the_counter_counts_each_bytecode_run_the_same_way_each_time() -> None:
    counts = []
    for n in (10, 10, 100):
        counter = BytecodeCounter()
        with counter.counting():
            _loop(n)
        counts.append(sum(n for code, n in counter.by_code.items() if code is _loop.__code__))
    assert counts[0] == counts[1] > 0
    assert counts[2] > 5 * counts[0]  # ten times the iterations
    counter = BytecodeCounter()
    _loop(10)  # not counting
    assert counter.by_code == {}


class _Garbage:
    """An object in a reference cycle whose finalizer runs :func:`_loop`."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        _loop(10)


def test_garbage_made_before_the_count_is_collected_before_it() -> None:
    # A collection during the count would otherwise run this earlier garbage's
    # finalizer (a process that ran other work first: a test worker) inside it.
    _Garbage()
    counter = BytecodeCounter()
    with counter.counting():
        gc.collect()
    assert _loop.__code__ not in counter.by_code


def test_threads_started_while_counting_are_counted_and_not_after() -> None:
    counter = BytecodeCounter()
    with counter.counting():
        worker = threading.Thread(target=_loop, args=(50,))
        worker.start()
        worker.join()
    counted = counter.by_code[_loop.__code__]
    assert counted > 0
    later = threading.Thread(target=_loop, args=(50,))
    later.start()
    later.join()
    assert counter.by_code[_loop.__code__] == counted


def test_a_thread_started_while_armed_is_counted_only_while_counting_and_apart() -> None:
    counter = BytecodeCounter()
    go, ran = threading.Event(), threading.Event()

    def worker() -> None:
        _loop(50)  # armed, not counting yet
        ran.set()
        go.wait()
        _loop(50)  # while counting

    with counter.armed():
        thread = threading.Thread(target=worker)
        thread.start()  # started before the count: an actor thread of a path
        ran.wait()
        assert counter.by_code == {} and counter.elsewhere == 0
        with counter.counting():
            go.set()
            thread.join()
            _loop(50)  # this thread's own
    counted = counter.by_code[_loop.__code__]
    assert counted > 0
    assert 0 < counter.elsewhere < sum(counter.by_code.values())
    assert counter.elsewhere >= counted / 2  # one of the two counted runs was the worker's


def test_the_report_sets_the_bus_beside_the_floor_and_shows_the_packages_it_adds_most() -> None:
    found = {
        "raw": {"aiokafka": 2000.0, "asyncio": 100.0},
        "floor": {"aiokafka": 1000.0, "a2a_bus/protocol": 1500.0, "asyncio": 150.0},
        "bus": {
            "aiokafka": 1100.0,
            "a2a_bus/protocol": 1600.0,
            "a2a_bus/core": 700.0,
            "a2a_bus/transport/kafka": 1500.0,
            "asyncio": 150.0,
        },
    }
    out = report(Counted(found, {"floor": 32.0, "bus": 64.0}, {"floor": 160.0, "bus": 150.0}), 1000)
    rows = {row.case: row for row in out.rows}
    vs_floor = rows["bus: bytecodes per request, vs floor"]
    assert (vs_floor.value, vs_floor.baseline) == (5050, 2650)
    assert rows["floor: bytecodes per request"].baseline == 2100
    [table] = out.tables
    packages = list(table.columns[0].cells)
    assert packages[:2] == ["a2a_bus/transport/kafka", "a2a_bus/core"]  # most added first
    assert list(table.columns[4].cells)[:2] == ["+1,500", "+700"]
    assert any("1,000 requests per path" in note for note in out.notes)
    assert any("records per fetch while counting: floor 32.0, bus 64.0" in n for n in out.notes)
    assert any(
        "outside the event loop's thread (the actors'): floor 160, bus 150" in n for n in out.notes
    )
    assert not any("records per fetch" in n for n in report(Counted(found), 1000).notes)
    assert not any("outside the event loop" in n for n in report(Counted(found), 1000).notes)
    assert not any("transport" in row.case for row in out.rows)  # not counted: not shown


def test_the_report_sets_the_bus_beside_the_bare_transport_when_it_was_counted() -> None:
    found = {
        "raw": {"aiokafka": 2000.0},
        "floor": {"aiokafka": 1000.0, "a2a_bus/protocol": 1500.0},
        "transport": {"aiokafka": 1100.0, "a2a_bus/transport/kafka": 900.0},
        "bus": {"aiokafka": 1100.0, "a2a_bus/transport/kafka": 1000.0, "a2a_bus/core": 700.0},
    }
    out = report(Counted(found), 1000)
    rows = {row.case: row for row in out.rows}
    vs_transport = rows["bus: bytecodes per request, vs transport only"]
    assert (vs_transport.value, vs_transport.baseline) == (2800, 2000)
    assert rows["transport: bytecodes per request"].value == 2000
    [table] = out.tables
    headers = [column.header for column in table.columns]
    assert headers == ["package", "raw", "floor", "transport", "bus", "bus - floor"]
    by_package = dict(zip(table.columns[0].cells, table.columns[3].cells, strict=True))
    assert by_package["a2a_bus/transport/kafka"] == "900"
    added = dict(zip(table.columns[0].cells, table.columns[5].cells, strict=True))
    assert added["a2a_bus/core"] == "+700" and added["a2a_bus/protocol"] == "-1,500"


def test_without_a_broker_the_count_says_so_and_measures_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from a2a_bus.bench.bytecodes import run

    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    out = run(quick=True)
    assert out.rows == [] and "not run" in out.title
    assert any("no Kafka broker" in note for note in out.notes)


@pytest.mark.kafka
@pytest.mark.timeout(300)
async def test_every_path_is_counted_on_a_broker_and_the_bus_runs_its_own_layers(
    kafka_bootstrap: str,
) -> None:
    counted = await measure(kafka_bootstrap, 64, quiet)
    found = counted.bytecodes
    assert set(found) == {"raw", "floor", "transport", "bus"}
    assert found["raw"]["aiokafka"] > 0 and "a2a_bus/core" not in found["raw"]
    assert found["floor"]["a2a_bus/protocol"] > 0 and "a2a_bus/core" not in found["floor"]
    for layer in ("a2a_bus/core", "a2a_bus/hosting", "a2a_bus/transport/kafka"):
        assert found["bus"][layer] > 0, layer
    # The bare transport runs the transport's layers and none above them.
    assert found["transport"]["a2a_bus/transport/kafka"] > 0
    assert "a2a_bus/core" not in found["transport"] and "a2a_bus/hosting" not in found["transport"]
    assert set(counted.records_per_fetch) == {"floor", "transport", "bus"}
    # The floor's and the bus's handlers run on actor threads started with the path.
    assert counted.elsewhere["floor"] > 0 and counted.elsewhere["bus"] > 0
    assert found["bus"]["pykka"] > 0
    assert all(n >= 1 for n in counted.records_per_fetch.values())
