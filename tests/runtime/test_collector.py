"""The garbage collector's young-generation threshold while a bus runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from a2a_bus import Bus
from a2a_bus.runtime.collector import (
    DEFAULT_THRESHOLD,
    MAX_THRESHOLD,
    YoungThreshold,
    choose_threshold,
    young_threshold,
)


@pytest.fixture(autouse=True)
def interpreter_default() -> Iterator[None]:
    """Each test starts from CPython's own thresholds and leaves them as they were."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def test_the_setting_names_a_threshold_or_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("A2A_GC_THRESHOLD", raising=False)
    assert choose_threshold() == DEFAULT_THRESHOLD
    assert choose_threshold(" OFF ") is None
    assert choose_threshold("2500") == 2500
    assert choose_threshold(4000) == 4000
    monkeypatch.setenv("A2A_GC_THRESHOLD", "off")
    assert choose_threshold() is None
    monkeypatch.setenv("A2A_GC_THRESHOLD", "3000")
    assert choose_threshold() == 3000


@pytest.mark.parametrize("bad", ["many", "0", -5, 0, 2.5, True, "1_000", "+5"])
def test_a_bad_setting_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="expected off or a whole number from 1 to 2147483647"):
        choose_threshold(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("beyond", ["3000000000", 2**31, 10**30])
def test_a_threshold_beyond_what_the_collector_takes_is_refused_when_the_bus_is_made(
    beyond: int | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert choose_threshold(str(MAX_THRESHOLD)) == MAX_THRESHOLD
    with pytest.raises(ValueError, match=r"A2A_GC_THRESHOLD=.*from 1 to 2147483647"):
        choose_threshold(beyond)
    monkeypatch.setenv("A2A_GC_THRESHOLD", str(beyond))
    with pytest.raises(ValueError, match="A2A_GC_THRESHOLD"):
        Bus.memory()  # not at start, from gc.set_threshold (OverflowError)


def test_holding_raises_the_young_threshold_and_the_last_release_restores_it() -> None:
    threshold = YoungThreshold()
    threshold.hold(5000)
    threshold.hold(5000)
    assert gc.get_threshold() == (5000, 10, 10)
    threshold.release()
    assert gc.get_threshold() == (5000, 10, 10)  # still held once
    threshold.release()
    assert gc.get_threshold() == (700, 10, 10)
    threshold.release()  # one release too many changes nothing
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_is_never_lowered() -> None:
    gc.set_threshold(50_000, 20, 30)
    threshold = YoungThreshold()
    threshold.hold(5000)
    assert gc.get_threshold() == (50_000, 20, 30)
    threshold.release()
    assert gc.get_threshold() == (50_000, 20, 30)


def test_a_disabled_young_generation_stays_disabled() -> None:
    gc.set_threshold(0, 10, 10)
    threshold = YoungThreshold()
    threshold.hold(5000)
    assert gc.get_threshold()[0] == 0
    threshold.release()
    assert gc.get_threshold()[0] == 0


def test_a_threshold_changed_by_the_application_meanwhile_is_kept() -> None:
    threshold = YoungThreshold()
    threshold.hold(5000)
    gc.set_threshold(1234, 10, 10)
    threshold.release()
    assert gc.get_threshold() == (1234, 10, 10)


def test_a_running_bus_holds_the_threshold_until_it_stops() -> None:
    # Relative to the holders already there: a test whose loop went away under a
    # running bus (on purpose) leaves that bus holding it.
    before = young_threshold.holders
    with Bus.memory(gc_threshold=60_000):
        assert gc.get_threshold()[0] == 60_000
        assert young_threshold.holders == before + 1
    assert young_threshold.holders == before
    if before == 0:
        assert gc.get_threshold()[0] == 700


def test_two_buses_hold_the_threshold_until_the_last_one_stops() -> None:
    before = young_threshold.holders
    first = Bus.memory(gc_threshold=60_000).start()
    try:
        with Bus.memory(gc_threshold=60_000):
            assert young_threshold.holders == before + 2
        assert young_threshold.holders == before + 1
        assert gc.get_threshold()[0] == 60_000  # the first bus still runs
    finally:
        first.stop()
    assert young_threshold.holders == before


def test_off_leaves_the_collector_alone() -> None:
    before = young_threshold.holders
    with Bus.memory(gc_threshold="off"):
        assert young_threshold.holders == before
        if before == 0:
            assert gc.get_threshold()[0] == 700
