"""Reports from actor threads reach the loop: none lost, each thread's in order."""

from __future__ import annotations

import asyncio
import threading

from a2a_bus.hosting.actor import thread_safe

WAIT = 30.0


async def test_reports_from_many_threads_all_arrive_in_order() -> None:
    loop = asyncio.get_running_loop()
    seen: dict[int, list[int]] = {}
    total = 0
    everything = asyncio.Event()
    threads, per_thread = 4, 2000

    def record(thread: int, n: int) -> None:
        nonlocal total
        seen.setdefault(thread, []).append(n)
        total += 1
        if total == threads * per_thread:
            everything.set()

    report = thread_safe(loop, record)

    def send(thread: int) -> None:
        for n in range(per_thread):
            report(thread, n)

    workers = [threading.Thread(target=send, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    await asyncio.wait_for(everything.wait(), WAIT)
    for worker in workers:
        worker.join(WAIT)
    assert {t: seen[t] for t in range(threads)} == {
        t: list(range(per_thread)) for t in range(threads)
    }
