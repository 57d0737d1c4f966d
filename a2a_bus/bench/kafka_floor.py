"""The floor of a bus on this stack: raw aiokafka plus the least per-event work.

The Kafka benchmark's baseline is a bare aiokafka ping-pong that carries an
opaque token. A bus built on aiokafka, pykka and CloudEvents cannot do less
per request than this path does: the baseline's two producers and two
consumers plus, per request and nothing more,

* the JSON-RPC request mapped to a CloudEvent and written as a structured record
  (the bus's own codec, orjson), and the response event likewise, both through
  the cheapest way aiokafka offers to produce (record batches per partition, as
  the bus's :class:`~a2a_bus.transport.kafka.batches.Batches` build them);
* both records decoded back into CloudEvents;
* de-duplication by (source, id) on both consumers;
* one pykka actor hop for the handler: ``tell`` in, the answer back on the
  loop through the bus's batched thread-safe call (one wake-up per burst);
* manual commits of what was answered, once per fetch.

Its topics are shaped as the bus's: the request topic has an agent inbox's
partitions and every request its own JSON-RPC id, so requests spread over them
as the bus's do; the reply topic has one partition, as a node's reply topic.

Everything else the bus guarantees is left out: in-order commit tracking with
concurrent keys, leases that mark redeliveries, per-key order, payload and
envelope bounds, supervision and retries, routing, metrics. What this path
reaches is what any bus on the same stack could at best reach; the bus's own
figure beside it shows what those guarantees cost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import pykka
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.bench.kafka_raw import TUNING, RawPingPong
from a2a_bus.hosting.actor import thread_safe
from a2a_bus.protocol import Adaptor, Failure, ext, from_kafka, to_kafka
from a2a_bus.transport.dedup import DedupWindow
from a2a_bus.transport.kafka.batches import Batches
from a2a_bus.transport.kafka.partitioning import pick_partition

#: As the bus's default de-duplication window.
WINDOW = 10_000


class _Echo(pykka.ThreadingActor):
    """The handler: answers with the request's params, on the loop."""

    def on_receive(self, message: Any) -> None:
        answer, record, event = message
        request = event.get_data()
        answer(record, event, request["params"], request["id"])


class FloorRequests(RawPingPong):
    """Request/response with only the work every bus on this stack must do."""

    name = "floor"
    auto_commit = False

    def __init__(self, bootstrap: str, run_id: str) -> None:
        super().__init__(bootstrap, run_id)
        self.run_id = run_id
        self.adaptor = Adaptor()
        #: What each request carries (None: its counter).
        self.payload: Any = None
        self._answered: dict[TopicPartition, int] = {}
        #: Fetches of both consumers that returned records, and the records they held.
        self.fetches = 0
        self.records_fetched = 0

    def topic_partitions(self) -> dict[str, int]:
        """Shaped as the bus's: requests over an agent inbox's partitions, answers
        on a one-partition reply topic."""
        return {self.requests: self.partitions, self.replies: 1}

    async def start(self) -> None:
        await super().start()
        for topic in (self.requests, self.replies):  # their partitions, for _produce
            await self.producer.partitions_for(topic)

    def _workers(self) -> list[Coroutine[Any, Any, None]]:
        self._batches = Batches(self.producer)  # both sides': the fewest producer calls
        self.actor = _Echo.start()
        self._answer = thread_safe(asyncio.get_running_loop(), self._send_answer)
        return [self._serve(), self._collect()]

    def _produce(self, topic: str, event: CloudEvent) -> asyncio.Future[None]:
        """Write ``event``; the future is done when the broker acknowledged it."""
        record = to_kafka(event, "structured")
        partitions = self._batches.partitions(topic)
        assert partitions is not None  # known since start()
        partition = pick_partition(record.key, *partitions)
        return self._batches.add(topic, partition, record.key, record.value, record.headers)

    def _send_answer(
        self, record: ConsumerRecord, request: CloudEvent, result: Any, request_id: Any
    ) -> None:
        response = {"jsonrpc": "2.0", "result": result, "id": request_id}
        reply_to = str(request.get_extension(ext.REPLY_TO))
        self._produce(reply_to, self.adaptor.response_event(request, response))
        self._answered[TopicPartition(record.topic, record.partition)] = record.offset + 1

    async def _serve(self) -> None:
        async for fetched in self._fresh_events(self.server):
            for record, event in fetched:
                self.actor.tell((self._answer, record, event))
            if self._answered:  # what the actor answered by now, once per fetch
                answered, self._answered = self._answered, {}
                await self.server.commit(answered)

    async def _collect(self) -> None:
        async for fetched in self._fresh_events(self.client):
            for _, event in fetched:
                future = self.waiting.pop(str(event.get_extension(ext.COLLABORATION)), None)
                if future is not None and not future.done():
                    future.set_result(event.get_data())

    async def call(self) -> Any:
        """One request; its response message."""
        self.counter += 1
        event_id = f"{self.run_id}-{self.counter}"
        request = echo_request(self.adaptor, self.counter, event_id, self.replies, self.payload)
        future = asyncio.get_running_loop().create_future()
        self.waiting[event_id] = future
        await self._produce(self.requests, request)
        return await future

    def fetched(self) -> tuple[int, int]:
        """Fetches so far that returned records, and the records they held."""
        return self.fetches, self.records_fetched

    async def _fresh_events(
        self, consumer: AIOKafkaConsumer
    ) -> AsyncIterator[list[tuple[ConsumerRecord, CloudEvent]]]:
        """Each fetch of ``consumer`` as its records' events, each (source, id) once."""
        seen = DedupWindow(WINDOW)
        while True:
            fetched = await consumer.getmany(timeout_ms=TUNING["fetch_max_wait_ms"])
            fresh = []
            if fetched:
                self.fetches += 1
                self.records_fetched += sum(map(len, fetched.values()))
            for records in fetched.values():
                for record in records:
                    event = from_kafka(record.value or b"", record.headers, record.key)
                    if seen.claim((event.get_source(), event.get_id())) is None:
                        fresh.append((record, event))
            yield fresh

    async def stop(self) -> None:
        await self._batches.aclose()  # stops self.producer (stopping it again is a no-op)
        await super().stop()
        self.actor.stop()


def echo_request(
    adaptor: Adaptor, value: int, event_id: str, reply_to: str, payload: Any = None
) -> CloudEvent:
    """The request event of JSON-RPC ``echo(value)`` (``echo(payload)`` when one is
    given) with id ``value`` (its record key, as a bus client's counter id is), the
    bus-wide unique ``event_id`` the bus gives every request and the caller's reply
    topic."""
    params = [value if payload is None else payload]
    message = {"jsonrpc": "2.0", "method": "echo", "params": params, "id": value}
    [request] = adaptor.from_json(message)
    if isinstance(request, Failure):
        raise RuntimeError(request.message)
    attributes = request.get_attributes()
    attributes["id"] = event_id
    attributes[ext.REPLY_TO] = reply_to
    return request
