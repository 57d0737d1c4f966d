"""Stopping an aiokafka consumer, whatever state a broker outage left it in.

Every consumer of the Kafka transport stops through :func:`stop_consumer`.
"""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer

log = logging.getLogger(__name__)


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """Stop ``consumer`` and close its connections, even with a broker away.

    A consumer stopped while one of its fetches backs off after failing (its
    broker down) raises that fetch's ``CancelledError`` from ``stop()``, which
    nobody asked for, and skips closing its client: the client's connections
    and metadata task would go on retrying the dead broker for the life of the
    process (aiokafka 0.14; aio-libs/aiokafka#647 reports ``stop()`` raising it
    from another of its tasks). That error is absorbed here and the client
    closed. A cancellation of the caller itself is passed on.
    """
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise  # ours: whoever stops us is owed it
        log.debug("a consumer's stop was cut short by a fetch backing off; closing its client")
        # aiokafka offers no public way to finish what its stop() skipped.
        await consumer._client.close()
