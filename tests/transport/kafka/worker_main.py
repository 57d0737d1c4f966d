"""A worker process for the multi-process Kafka tests: one replica of ``worker``.

    python tests/transport/kafka/worker_main.py BOOTSTRAP PREFIX LOG_FILE [--delay SECONDS]

Builds ``Bus.kafka(BOOTSTRAP, prefix=PREFIX)``, spawns one replica of the
``worker`` agent and prints ``ready`` once its inbox group is joined. Each
``work(n)`` request appends one JSON line ``{"n", "redelivered", "pid"}`` to
LOG_FILE (O_APPEND, one ``write`` per line, so several processes can share the
file and a line survives ``kill -9``), then returns ``n``. Runs until SIGTERM
(graceful stop) or SIGKILL.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time

import orjson

from a2a_bus import Agent, Bus, method
from a2a_bus.runtime import loops


class Worker(Agent):
    """Logs every request it handles, with its redelivery flag."""

    agent_id = "worker"
    log_fd = -1
    delay = 0.0

    @method
    def work(self, n: int) -> int:
        line = {"n": n, "redelivered": self.redelivered, "pid": os.getpid()}
        os.write(self.log_fd, orjson.dumps(line) + b"\n")
        if self.delay:
            time.sleep(self.delay)
        return n


async def serve(bootstrap: str, prefix: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    bus = Bus.kafka(
        bootstrap,
        bus_options={"prefix": prefix, "heartbeat": 60.0},
        # The broker's minimum: a killed worker's partitions move on soonest.
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
    )
    bus.spawn(Worker)
    async with bus:
        print("ready", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bootstrap")
    parser.add_argument("prefix")
    parser.add_argument("log_file")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per request")
    args = parser.parse_args(argv)
    Worker.log_fd = os.open(args.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    Worker.delay = args.delay
    try:
        loops.run(serve(args.bootstrap, args.prefix))
    finally:
        os.close(Worker.log_fd)
    sys.exit(0)


if __name__ == "__main__":
    main()
