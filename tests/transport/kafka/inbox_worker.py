"""A process of the multi-process inbox tests: one inbox consumer for some topics.

    python tests/transport/kafka/inbox_worker.py BOOTSTRAP PREFIX LOG_FILE TOPIC... [--delay S]

Starts a ``KafkaTransport``, subscribes every TOPIC on ``transport.inboxes(PREFIX)``
(all at once, as a bus starting its agents does) and prints ``ready``. Each
delivery appends one JSON line ``{"topic", "n", "partition", "offset",
"redelivered", "pid"}`` to LOG_FILE (O_APPEND, one ``write`` per line, so
several processes can share the file and a line survives ``kill -9``), then
waits ``--delay`` seconds before it finishes. Runs until SIGTERM (graceful
stop) or SIGKILL.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

import orjson

from a2a_bus.transport import Delivery
from a2a_bus.transport.kafka import KafkaTransport


async def serve(args: argparse.Namespace, log_fd: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    async def handle(delivery: Delivery) -> None:
        data = delivery.event.get_data()
        assert isinstance(data, dict)
        line = {
            "topic": delivery.topic,
            "n": data["n"],
            "partition": delivery.partition,
            "offset": delivery.offset,
            "redelivered": delivery.redelivered,
            "pid": os.getpid(),
        }
        os.write(log_fd, orjson.dumps(line) + b"\n")
        if args.delay:
            await asyncio.sleep(args.delay)

    transport = KafkaTransport(
        args.bootstrap,
        dlq_topic=f"{args.prefix}.dlq",
        # The broker's minimum: a killed process's partitions move on soonest.
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
    )
    async with transport:
        inboxes = transport.inboxes(args.prefix)
        await asyncio.gather(*(inboxes.subscribe(topic, handle) for topic in args.topics))
        print("ready", flush=True)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bootstrap")
    parser.add_argument("prefix")
    parser.add_argument("log_file")
    parser.add_argument("topics", nargs="+")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per record")
    args = parser.parse_args()
    log_fd = os.open(args.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        asyncio.run(serve(args, log_fd))
    finally:
        os.close(log_fd)


if __name__ == "__main__":
    main()
