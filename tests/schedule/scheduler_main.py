"""A process running the scheduler group ``g`` on Kafka until SIGTERM, for the tests of
ticks across processes and restarts. It prints ``own beat`` / ``lost beat`` when it
gains or loses the schedule.

Usage: scheduler_main.py BOOTSTRAP PREFIX EVERY SUBJECT
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

from a2a_bus import Bus
from a2a_bus.schedule import Schedule


async def main(bootstrap: str, prefix: str, every: float, subject: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    bus = Bus.kafka(bootstrap, bus_options={"prefix": prefix}, session_timeout_ms=6000)
    beat = Schedule("beat", every=every, publish=subject, missed="catch_up")
    async with bus, bus.scheduler([beat], group="g") as scheduler:
        print("scheduling", flush=True)
        owned = False
        while not stop.is_set():
            if ("beat" in scheduler.runs) != owned:
                owned = not owned
                print("own beat" if owned else "lost beat", flush=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.05)
    print("stopped", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]))
