"""The almanac example: its answers come from the units MCP server it starts, and its
schedule wakes it (the demo runs it too: tests/test_demo.py)."""

from __future__ import annotations

import time
from typing import Any

from a2a_bus import Bus
from a2a_bus.examples import almanac
from a2a_bus.examples.concierge import DigestReader

WAIT = 60.0  # seconds; a guard against hangs, never a performance limit


def _chat(bus: Bus, message: str) -> Any:
    return bus.client().request(almanac.AGENT_ID, "chat", {"message": message})


def test_the_answer_is_what_the_mcp_server_computed() -> None:
    with Bus.memory() as bus:
        bus.spawn(almanac.almanac_class(almanac.scripted_client(), every=3600))
        assert _chat(bus, "how many ft is 3 m?") == "3 m = 9.843 ft"
        assert _chat(bus, "how many km is 1 mi?") == "1 mi = 1.609 km"


def test_a_tool_error_from_the_server_reaches_the_answer() -> None:
    with Bus.memory() as bus:
        bus.spawn(almanac.almanac_class(almanac.scripted_client(), every=3600))
        answer = _chat(bus, "how many parsec is 3 km?")
        assert answer.startswith("The units server could not answer (error:")
        assert "unknown unit 'parsec'" in answer


def test_each_tick_of_its_schedule_wakes_it_once() -> None:
    with Bus.memory() as bus:
        bus.spawn(DigestReader)
        bus.spawn(almanac.almanac_class(almanac.scripted_client(), every=0.5))
        client = bus.client()
        deadline = time.monotonic() + WAIT
        notes: list[dict[str, Any]] = []
        while len(notes) < 2 and time.monotonic() < deadline:
            notes = [n for n in client.request("digest-reader", "read") if n["agent"] == "almanac"]
            time.sleep(0.05)
    ticks = [note["trigger"]["id"] for note in notes]
    assert len(ticks) >= 2 and len(set(ticks)) == len(ticks)
    for note, tick in zip(notes, ticks, strict=True):
        assert tick.startswith(f"{almanac.CLOCK}@")
        assert note["answer"] == f"Check-in at tick {tick.split('@', 1)[1]}"
