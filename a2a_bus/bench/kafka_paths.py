"""The bus's request/response paths of the Kafka benchmark (beside the raw baseline,
:mod:`a2a_bus.bench.kafka_raw`, and the floor, :mod:`a2a_bus.bench.kafka_floor`)."""

from __future__ import annotations

import asyncio
from typing import Any

from a2a_bus.bench.kafka_floor import echo_request
from a2a_bus.bench.kafka_raw import TUNING
from a2a_bus.bench.load import IN_FLIGHT_LEVELS
from a2a_bus.bus import Bus
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.protocol import Adaptor, ext
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.kafka.transport import KafkaTransport


class BenchEcho(Agent):
    """Answers with its argument."""

    agent_id = "bench-echo"
    # Room for every request in flight, so the bench measures throughput, not
    # backpressure pauses.
    mailbox_size = 2 * max(IN_FLIGHT_LEVELS)

    @method
    def echo(self, value: Any) -> Any:
        return value


class BusRequests:
    """The bus path: ``Bus.kafka`` with a real agent, the async client's ``request``."""

    def __init__(self, bootstrap: str, run_id: str, delivery: str = "at_least_once") -> None:
        name = "" if delivery == "at_least_once" else "eo"
        options = {"prefix": f"bench{run_id}{name}", "heartbeat": 60.0}
        self.bus = Bus.kafka(bootstrap, bus_options=options, delivery=delivery, **TUNING)
        self.bus.spawn(BenchEcho)
        transport = self.bus.transport
        assert isinstance(transport, KafkaTransport)
        self.transport = transport
        self.client = self.bus.async_client()
        self.counter = 0
        #: What each request carries (None: its counter).
        self.payload: Any = None

    def fetched(self) -> tuple[int, int]:
        """Fetches so far that returned records, and the records they held."""
        return self.transport.metrics.fetches, self.transport.metrics.fetched

    async def start(self) -> None:
        await self.bus.astart()

    async def call(self) -> Any:
        """One request; its result (what it carried)."""
        self.counter += 1
        value = self.counter if self.payload is None else self.payload
        return await self.client.request("bench-echo", "echo", [value])

    async def stop(self) -> None:
        await self.bus.astop()


class TransportRequests:
    """Request/response as the bus does it, over two bare KafkaTransports."""

    def __init__(self, bootstrap: str, run_id: str) -> None:
        self.adaptor = Adaptor()
        self.inbox = f"bench.t.agent.echo.{run_id}"
        self.reply_topic = f"bench.t.reply.{run_id}"
        self.run_id = run_id
        self.client = KafkaTransport(bootstrap, dlq_topic=f"bench.dlq.{run_id}", **TUNING)
        self.server = KafkaTransport(bootstrap, dlq_topic=f"bench.dlq.{run_id}", **TUNING)
        self.waiting: dict[str, asyncio.Future[Any]] = {}
        self.counter = 0

    def fetched(self) -> tuple[int, int]:
        """Fetches so far that returned records, and the records they held."""
        fetches = self.client.metrics.fetches + self.server.metrics.fetches
        return fetches, self.client.metrics.fetched + self.server.metrics.fetched

    async def start(self) -> None:
        self.client.declare_private(self.reply_topic)  # one partition, as a node's
        await self.client.start()
        await self.server.start()
        await self.server.subscribe([self.inbox], f"echo.{self.run_id}", self._serve)
        await self.client.subscribe(
            [self.reply_topic], f"node.{self.run_id}", self._collect, max_in_flight=1024
        )

    async def _serve(self, delivery: Delivery) -> None:
        request = delivery.event
        data = request.get_data()
        assert isinstance(data, dict)
        response = {"jsonrpc": "2.0", "result": data.get("params"), "id": data.get("id")}
        reply_to = request.get_extension(ext.REPLY_TO)
        assert isinstance(reply_to, str)
        await self.server.publish(reply_to, self.adaptor.response_event(request, response))

    async def _collect(self, delivery: Delivery) -> None:
        future = self.waiting.pop(str(delivery.event.get_extension(ext.COLLABORATION)), None)
        if future is not None and not future.done():
            future.set_result(delivery.event.get_data())

    async def call(self) -> None:
        self.counter += 1
        event_id = f"{self.run_id}-{self.counter}"
        request = echo_request(self.adaptor, self.counter, event_id, self.reply_topic)
        future = asyncio.get_running_loop().create_future()
        self.waiting[event_id] = future
        await self.client.publish(self.inbox, request)
        await future

    async def stop(self) -> None:
        await self.client.stop()
        await self.server.stop()
