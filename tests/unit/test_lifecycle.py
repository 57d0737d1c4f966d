"""Calls on a bus that is not running fail with BusStopped, whatever the state."""

from __future__ import annotations

import gc
import warnings

import pytest

from a2a_bus import Bus
from a2a_bus.errors import BusStopped


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
