"""The Kafka benchmark's baseline: a plain aiokafka ping-pong."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from a2a_bus.bench.kafka_topics import create_run_topics
from a2a_bus.transport.kafka.config import KafkaSettings

#: Producer and consumer tuning shared by every side (see docs/kafka.md).
TUNING: dict[str, Any] = {"linger_ms": 0, "fetch_max_wait_ms": 100, "max_poll_records": 500}


class RawPingPong:
    """Plain aiokafka, one request topic, one reply topic: a producer and a
    consumer on each side, with the bus's producer guarantees (idempotent,
    ``acks=all``); the responder answers each record with its value, under its key."""

    #: Names this path's topics and groups.
    name = "raw"
    #: The responder's commits: aiokafka's in the background, or the path's own.
    auto_commit = True

    def __init__(self, bootstrap: str, run_id: str) -> None:
        self.bootstrap = bootstrap
        self.requests = f"bench.{self.name}.req.{run_id}"
        self.replies = f"bench.{self.name}.rep.{run_id}"
        self.waiting: dict[Any, asyncio.Future[Any]] = {}
        self.counter = 0
        #: The bytes each request carries (None: its key, the counter).
        self.payload: bytes | None = None
        self.tasks: list[asyncio.Task[None]] = []
        #: Partitions of its request topic (an agent inbox's, by default); made up
        #: front, so the shape does not depend on the broker's ``num.partitions``.
        self.partitions = KafkaSettings().inbox_partitions

    def topic_partitions(self) -> dict[str, int]:
        """Its topics and their partitions, made before it starts: ``partitions``
        for both (the shape the benchmark's broker gave them when they were left
        to its default)."""
        return {self.requests: self.partitions, self.replies: self.partitions}

    async def start(self) -> None:
        await create_run_topics(self.bootstrap, self.topic_partitions())
        common = {"bootstrap_servers": self.bootstrap}
        producer = {"enable_idempotence": True, "acks": "all", "linger_ms": TUNING["linger_ms"]}
        consumer = {
            "fetch_max_wait_ms": TUNING["fetch_max_wait_ms"],
            "auto_offset_reset": "earliest",
            "enable_auto_commit": self.auto_commit,
        }
        self.producer = AIOKafkaProducer(**producer, **common)
        self.server_producer = AIOKafkaProducer(**producer, **common)
        self.server = AIOKafkaConsumer(
            self.requests, group_id=f"{self.requests}.server", **consumer, **common
        )
        self.client = AIOKafkaConsumer(
            self.replies, group_id=f"{self.replies}.client", **consumer, **common
        )
        for part in (self.producer, self.server_producer, self.server, self.client):
            await part.start()
        self.tasks = [asyncio.create_task(work) for work in self._workers()]

    def _workers(self) -> list[Coroutine[Any, Any, None]]:
        """What runs while the path is started: answering and collecting."""
        return [self._serve(), self._collect()]

    async def _serve(self) -> None:
        async for record in self.server:
            await self.server_producer.send(self.replies, record.value, key=record.key)

    async def _collect(self) -> None:
        async for record in self.client:
            future = self.waiting.pop(record.key or b"", None)
            if future is not None and not future.done():
                future.set_result(record.value)

    async def call(self) -> Any:
        """One request; the value of its answer."""
        self.counter += 1
        token = str(self.counter).encode()
        future = asyncio.get_running_loop().create_future()
        self.waiting[token] = future
        value = token if self.payload is None else self.payload
        await self.producer.send_and_wait(self.requests, value, key=token)
        return await future

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for part in (self.client, self.server, self.producer, self.server_producer):
            await part.stop()
