"""The bus picks its event loop from A2A_EVENT_LOOP (uvloop by default)."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from a2a_bus import Bus
from a2a_bus.runtime import loops


def test_default_is_uvloop_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(loops.ENV, raising=False)
    assert loops.loop_kind() == "uvloop"
    loop = loops.new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_asyncio_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(loops.ENV, "asyncio")
    loop = loops.new_event_loop()
    try:
        assert not isinstance(loop, uvloop.Loop)
        assert isinstance(loop, asyncio.BaseEventLoop)
    finally:
        loop.close()


def test_unknown_choice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(loops.ENV, "trio")
    with pytest.raises(ValueError, match="A2A_EVENT_LOOP"):
        loops.new_event_loop()


@pytest.mark.parametrize("kind", ["uvloop", "asyncio"])
def test_bus_thread_runs_on_the_chosen_loop(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(loops.ENV, kind)
    with Bus.memory() as bus:
        assert isinstance(bus.loop, uvloop.Loop) == (kind == "uvloop")
        assert bus.client().request(None, "methods/list") == {"methods": []}


def test_run_returns_the_coroutines_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(loops.ENV, raising=False)

    async def kind() -> str:
        return type(asyncio.get_running_loop()).__module__.split(".")[0]

    assert loops.run(kind()) == "uvloop"
