"""Schedules on a real Kafka broker: two processes run one scheduler group; the owner
of the schedule is restarted, then killed; every tick is published exactly once."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from a2a_bus import Bus
from a2a_bus.schedule.spec import iso

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
MAIN = Path(__file__).resolve().parent / "scheduler_main.py"
EVERY = 0.5
WAIT = 120.0  # a guard against hangs, never a performance limit


class Process:
    """One scheduler process; its stdout lines arrive on a queue."""

    def __init__(self, bootstrap: str, prefix: str, subject: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(MAIN), bootstrap, prefix, str(EVERY), subject],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.owns = False

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            self._note(line)
            if line == text:
                return
        pytest.fail(f"no line {text!r} (exit {self.process.poll()})")

    def _note(self, line: str) -> None:
        if line in ("own beat", "lost beat"):
            self.owns = line == "own beat"

    def poll_lines(self) -> None:
        while True:
            try:
                self._note(self.lines.get_nowait())
            except queue.Empty:
                return

    def stop(self, signum: int = signal.SIGTERM) -> int:
        self.process.send_signal(signum)
        return self.process.wait(timeout=WAIT)


def owner(processes: list[Process]) -> Process:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        for process in processes:
            process.poll_lines()
        owning = [p for p in processes if p.owns and p.process.poll() is None]
        if len(owning) == 1:
            return owning[0]
        time.sleep(0.05)
    pytest.fail("no single owner of the schedule")


def ticks(bus: Bus, subject: str) -> list[str]:
    client = bus.client()
    ids: list[str] = []
    cursor = None
    while True:
        page = client.read(subject, limit=1000, cursor=cursor)
        if not page.events:
            return ids
        ids.extend(event.get_id() for event in page.events)
        cursor = page.cursor


def more_ticks(bus: Bus, subject: str, count: int) -> None:
    start = len(ticks(bus, subject))
    deadline = time.monotonic() + WAIT
    while len(ticks(bus, subject)) < start + count:
        assert time.monotonic() < deadline, "the schedule stopped firing"
        time.sleep(0.2)


def test_each_tick_fires_once_across_processes_restarts_and_a_crash(kafka_bootstrap: str) -> None:
    prefix = f"sched{uuid.uuid4().hex[:8]}"
    subject = "ops.beat"
    first = Process(kafka_bootstrap, prefix, subject)
    second = Process(kafka_bootstrap, prefix, subject)
    processes = [first, second]
    with Bus.kafka(kafka_bootstrap, bus_options={"prefix": prefix}) as bus:
        try:
            first.wait_for("scheduling")
            second.wait_for("scheduling")
            more_ticks(bus, subject, 4)

            # A clean restart of the owner: the other takes over at once, then it may be back.
            old = owner(processes)
            assert old.stop() == 0
            processes.remove(old)
            processes.append(Process(kafka_bootstrap, prefix, subject))
            processes[-1].wait_for("scheduling")
            more_ticks(bus, subject, 4)

            # A crash of the owner (no goodbye): the other takes over after the session
            # timeout and catches up the ticks missed meanwhile.
            crashed = owner(processes)
            crashed.stop(signal.SIGKILL)
            processes.remove(crashed)
            survivor = owner(processes)
            more_ticks(bus, subject, 4)
            assert survivor.stop() == 0
            processes.remove(survivor)
        finally:
            for process in processes:
                if process.process.poll() is None:
                    process.stop(signal.SIGKILL)
        fired = ticks(bus, subject)
    assert len(fired) == len(set(fired)), "a tick was fired twice"
    times = [fired_id.split("@", 1)[1] for fired_id in fired]
    step = int(EVERY * 1000)
    first_ms = _ms(times[0])
    expected = [iso(first_ms + i * step) for i in range(len(times))]
    assert sorted(times) == expected, "a tick was lost"


def _ms(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
