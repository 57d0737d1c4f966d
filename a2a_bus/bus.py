"""The Bus: a transport, the agents hosted in this process, and the caller side.

One asyncio loop per process owns all I/O. Used from async code
(``async with bus:``) the bus runs on the current loop; used from sync code
(``with bus:`` or ``bus.start()``) it starts and owns a loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.core.correlation import Correlator, ReplyStream
from a2a_bus.core.errors import BusStopped
from a2a_bus.core.metrics import Metrics
from a2a_bus.core.routing import Route, RouteKind, RoutingError, Topics, decide
from a2a_bus.core.streams import CANCEL_METHOD, cancel_message
from a2a_bus.discovery.directory import (
    BUILTIN_METHODS,
    Announcer,
    Directory,
    known_agents_required,
)
from a2a_bus.discovery.registry import follow_registry
from a2a_bus.hosting.actor import serving_loop
from a2a_bus.hosting.agent import Agent
from a2a_bus.hosting.host import AgentHost
from a2a_bus.hosting.supervisor import RestartPolicy
from a2a_bus.protocol import (
    Adaptor,
    ErrorCode,
    Kind,
    error_response,
    event_kind,
    ext,
    jsonrpc_of,
    new_event,
    new_id,
    result_response,
)
from a2a_bus.runtime.affinity import choose_cpu, pin_current_thread
from a2a_bus.runtime.env import bus_options, transport_kind
from a2a_bus.runtime.portal import LoopThread, SyncBridge
from a2a_bus.transport.base import Delivery, Subscription, Transport
from a2a_bus.transport.memory.transport import MemoryTransport

log = logging.getLogger(__name__)
T = TypeVar("T")
BLOCKING_ON_LOOP = "blocking call on the bus loop: use the async client (await ...)"


class Bus:
    """Hosts agents and sends requests, events and streams between them."""

    def __init__(
        self,
        transport: Transport,
        *,
        prefix: str = "a2a",
        node: str | None = None,
        adaptor: Adaptor | None = None,
        request_timeout: float = 30.0,
        heartbeat: float = 5.0,
        card_ttl: float | None = None,
        restart_policy: RestartPolicy | None = None,
        pin_cpu: int | str | None = None,
        require_known_agents: bool | None = None,
        registry_timeout: float = 10.0,
    ) -> None:
        self.transport = transport
        self.topics = Topics(prefix)
        transport.declare_compacted(self.topics.registry)  # one card per agent id
        self.node = node or uuid.uuid4().hex[:12]
        self.adaptor = adaptor or Adaptor()
        self.source = f"a2a-bus/{self.node}"
        self.request_timeout = request_timeout
        self.heartbeat = heartbeat
        self.restart_policy = restart_policy or RestartPolicy()
        #: The loop thread that starts the bus and the actor threads stay on this CPU
        #: (see a2a_bus.runtime.affinity); None: off. From ``A2A_PIN_CPU`` unless given.
        self.pin_cpu = choose_cpu(pin_cpu)
        self.metrics = Metrics()
        self.correlator = Correlator(self.metrics, stop_upstream=self._send_cancel)
        self.directory = Directory(self.adaptor, card_ttl if card_ttl else 3 * heartbeat)
        self.announcer = Announcer(
            transport, self.topics.registry, self.adaptor, heartbeat, self._cards
        )
        #: Refuse messages to agents discovery does not know (``Directory.known``);
        #: from ``A2A_REQUIRE_KNOWN_AGENTS`` (default true) unless given.
        self.require_known_agents = known_agents_required(require_known_agents)
        #: Seconds ``astart`` waits for the registry to be read to its end.
        self.registry_timeout = registry_timeout
        self.reply_topic = self.topics.reply(self.node)
        #: Answers to this process's callers skip the reply topic (in-process transport).
        self.local_replies = isinstance(transport, MemoryTransport)
        self.hosts: list[AgentHost] = []
        #: Agent -> caller streams running here: request id -> stop it.
        self.running_streams: dict[str, Callable[[], None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._subscriptions: list[Subscription] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: LoopThread | None = None
        self._running = False
        self._client: Any = None
        self._sync = SyncBridge()

    # -- construction ---------------------------------------------------------------

    @classmethod
    def memory(cls, *, partitions: int = 4, retention: int = 100_000, **options: Any) -> Bus:
        """A bus on the in-process transport."""
        topics = Topics(options.get("prefix", "a2a"))
        transport = MemoryTransport(
            partitions=partitions,
            retention=retention,
            dlq_topic=topics.dlq,
        )
        return cls(transport, **options)

    @classmethod
    def kafka(
        cls,
        bootstrap: str | None = None,
        *,
        bus_options: dict[str, Any] | None = None,
        **kafka_options: Any,
    ) -> Bus:
        """A bus on Kafka; ``kafka_options`` are KafkaSettings fields (SASL/SSL too)."""
        from a2a_bus.transport.kafka.transport import KafkaTransport

        options = dict(bus_options or {})
        kafka_options.setdefault("dlq_topic", Topics(options.get("prefix", "a2a")).dlq)
        return cls(KafkaTransport(bootstrap, **kafka_options), **options)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Bus:
        """``A2A_TRANSPORT`` (memory|kafka; kafka when a bootstrap is set), ``A2A_PREFIX``,
        ``A2A_NODE``, ``A2A_REQUEST_TIMEOUT``, ``A2A_HEARTBEAT``, ``A2A_PIN_CPU``; Kafka from
        ``A2A_KAFKA_*``."""
        env = os.environ if environ is None else environ
        options = bus_options(env)  # names a bad variable and its allowed values
        if transport_kind(env) == "memory":
            return cls.memory(**options)
        from a2a_bus.transport.kafka.config import KafkaSettings
        from a2a_bus.transport.kafka.transport import KafkaTransport

        settings = KafkaSettings.from_env(env, dlq_topic=Topics(options["prefix"]).dlq)
        return cls(KafkaTransport(settings=settings), **options)

    # -- agents ---------------------------------------------------------------------

    def spawn(
        self, agent_cls: type[Agent], replicas: int = 1, *args: Any, **kwargs: Any
    ) -> AgentHost:
        """Host ``replicas`` actors of ``agent_cls`` (constructor gets ``args``/``kwargs``).

        Before ``start()`` it is recorded; on a running bus it starts now (from
        the bus's own loop use ``await bus.aspawn(...)``).
        """
        host = AgentHost(self, agent_cls, replicas, args, kwargs)
        if self._running:
            self._run(self._add_host(host))
        else:
            self.hosts.append(host)
        return host

    async def aspawn(
        self, agent_cls: type[Agent], replicas: int = 1, *args: Any, **kwargs: Any
    ) -> AgentHost:
        host = AgentHost(self, agent_cls, replicas, args, kwargs)
        if self._running:
            await self._on_loop(self._add_host(host))
        else:
            self.hosts.append(host)
        return host

    def _cards(self) -> list[dict[str, Any]]:
        """The heartbeat's cards: agents that started (none for one still starting,
        which may yet fail)."""
        return [host.card() for host in self.hosts if self.directory.hosts(host.agent_id)]

    async def _add_host(self, host: AgentHost) -> None:
        """Start ``host`` on the running bus; if it fails it is not hosted at all."""
        self.hosts.append(host)
        try:
            await self._start_host(host)
        except BaseException:
            self.hosts.remove(host)
            raise

    async def _start_host(self, host: AgentHost) -> None:
        """Start ``host`` and announce it; if that fails, stop what it started."""
        self.directory.expect_local(host.agent_id)
        try:
            await host.start()
            card = host.card()
            self.directory.add_local(card)
            await self.announcer.announce(card)
        except BaseException:
            await self._stop_host(host)
            raise

    async def _stop_host(self, host: AgentHost) -> None:
        await self._withdraw(host)
        await host.stop()

    async def _withdraw(self, host: AgentHost) -> None:
        """Say "gone" on the registry if ``host`` was announced; route no more to it here."""
        if self.directory.hosts(host.agent_id):
            with contextlib.suppress(Exception):
                await self.announcer.announce(host.card(), gone=True)
        self.directory.remove_local(host.agent_id)

    # -- lifecycle ------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._running

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise BusStopped("the bus is not running")
        return self._loop

    async def astart(self) -> None:
        """Start on the running loop: transport, reply and registry groups, agents.

        If it raises (an agent's constructor fails, the broker is unreachable),
        what it started is stopped again and the bus is not running.
        """
        if self._running:
            return
        self._loop = asyncio.get_running_loop()
        if self.pin_cpu is not None:
            # This loop's thread; the threads it starts from now on (the actors) inherit it.
            pin_current_thread(self.pin_cpu)
        try:
            await self._start_parts()
        except BaseException:
            try:
                await self._shutdown()
            except Exception:  # the start's own error is the one to raise
                log.exception("stopping a bus whose start failed")
            raise

    async def _start_parts(self) -> None:
        await self.transport.start()
        topics = self.topics
        self._subscriptions.append(
            await self.transport.subscribe(
                [self.reply_topic],
                self.reply_topic,
                self._on_reply,
                max_in_flight=1024,
                durable=False,  # answers for this process's callers only
            )
        )
        self._subscriptions.append(
            await follow_registry(
                self.transport,
                topics.registry,
                f"{topics.registry}.{self.node}",
                self.directory,
                self.registry_timeout,
                dlq_topic=topics.dlq,
                announcer=self.announcer,
            )
        )
        # Running from here: an agent's on_start may already call other agents.
        self._running = True
        for host in list(self.hosts):
            await self._start_host(host)
        self.announcer.start()

    async def astop(self) -> None:
        """Drain in-flight work, say goodbye on the registry, and disconnect."""
        if self._running:
            await self._shutdown()

    async def _shutdown(self) -> None:
        """Stop what is running (all of it after a start, part of it after a failed one)."""
        await self.announcer.stop()
        for host in self.hosts:  # all said gone first: no new work while they drain
            await self._withdraw(host)
            for replica in host.replicas:
                # Before the host drains its deliveries: one waiting for an agent
                # that cannot start would wait forever.
                replica.begin_stop()
        for host in self.hosts:
            await host.stop()
        subscriptions, self._subscriptions = self._subscriptions, []
        self.correlator.drain()  # a stream reader that is behind does not hold the reply topic
        for subscription in subscriptions:
            await subscription.stop()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._running = False
        self.correlator.close()
        await self.transport.stop()

    def start(self) -> Bus:
        """Start on a loop thread owned by the bus (for sync code)."""
        if self._running:
            return self
        self._thread = LoopThread(f"a2a-bus-{self.node}")
        loop = self._loop = self._thread.start()
        try:
            self._sync.call(loop, self.astart())
        except BaseException:
            self._stop_thread()
            raise
        return self

    def stop(self) -> None:
        """Stop the bus started by :meth:`start`, after in-flight work drained.

        Refused (RuntimeError, at once) on the bus loop and in the bus's own
        handlers: it waits for them, so it would wait for itself.
        """
        if self._thread is None:
            return
        loop = self.loop
        _refuse_waiting_on(loop, "bus.stop()")
        try:
            self._sync.call(loop, self.astop())
        finally:
            self._stop_thread()

    def _stop_thread(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop()
            self._loop = None  # closed: later calls get BusStopped, not "loop is closed"
            self._sync.abandon()  # calls that never ran or never ended: no hang

    def __enter__(self) -> Bus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Bus:
        await self.astart()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.astop()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the bus loop from another thread and wait for it."""
        try:
            loop = self.loop
        except BusStopped:
            coro.close()  # never started: no "never awaited" warning on top
            raise
        if _running_on(loop):
            coro.close()
            raise RuntimeError(BLOCKING_ON_LOOP)
        return self._sync.call(loop, coro)

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """``coro`` to await on the bus loop, from the bus loop or any other loop.

        On the bus loop it is ``coro`` itself (no wrapping coroutine: this sits on
        every request's path).
        """
        loop = self._loop
        if loop is None:
            coro.close()
            raise BusStopped("the bus is not running")
        if asyncio.get_running_loop() is loop:
            return coro
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    # -- clients --------------------------------------------------------------------

    def client(self) -> Any:
        """The sync client (:class:`a2a_bus.client.Client`) of this bus."""
        from a2a_bus.client import Client

        if self._client is None:
            self._client = Client(self)
        return self._client

    def async_client(self) -> Any:
        """An async client (:class:`a2a_bus.client.AsyncClient`) of this bus."""
        from a2a_bus.client import AsyncClient

        return AsyncClient(self)

    # -- the caller side (runs on the bus loop) -------------------------------------

    def route(self, event: CloudEvent) -> Route:
        """Where ``event`` goes (:func:`~a2a_bus.core.routing.decide`); RoutingError -32002
        "Agent not found" (id in ``data``) for an agent discovery does not know."""
        route = decide(event, self.topics, self.directory.method_owner)
        agent_id = route.agent_id
        if (
            route.kind is RouteKind.P2P
            and self.require_known_agents
            and not self.directory.known(agent_id or "")
        ):
            raise RoutingError(ErrorCode.AGENT_UNAVAILABLE, "Agent not found", agent_id)
        return route

    async def send(
        self, event: CloudEvent, *, timeout: float | None = None, fresh: bool = False
    ) -> dict[str, Any] | None:
        """Route ``event``; for a request wait for its response (the caller's id restored).

        An event without ``a2amethod`` whose type is ``<prefix>.<method>.req`` (or
        ``.stream``, or a notification's ``<prefix>.<method>``) calls that method.

        ``fresh``: the event was made for this call alone, so it is sent as is
        (given its bus-wide id and reply topic) rather than copied.
        """
        if not self._running:
            raise BusStopped("the bus is not running")
        # The attributes dict is read directly: this runs for every request.
        attributes = event.get_attributes()
        if ext.METHOD not in attributes:
            # A native event calls the method its type names (PROTOCOL.md section 3);
            # events made from JSON-RPC always carry a2amethod, so they skip this.
            event = self.adaptor.with_method(event)
            attributes = event.get_attributes()
        is_request = event_kind(event) is Kind.REQUEST
        data = event.get_data()
        message = jsonrpc_of(data)
        caller_id = message.get("id") if message is not None else attributes["id"]
        method = attributes.get(ext.METHOD)
        if (
            method in BUILTIN_METHODS
            and attributes.get(ext.TARGET_AGENT) is None
            and attributes.get("subject") is None
        ):
            params = message.get("params") if message is not None else data
            return self.directory.answer(method, params, caller_id) if is_request else None
        try:
            route = self.route(event)
            if (
                not is_request
                and route.kind is RouteKind.P2P
                and isinstance(method, str)
                and self.directory.lacks(route.agent_id or "", method)
            ):
                # A request is answered -32601 by the agent; a notification would
                # only be dead-lettered there, out of its sender's sight.
                raise RoutingError(ErrorCode.METHOD_NOT_FOUND, "Method not found", method)
        except RoutingError as exc:
            error = exc.json_rpc_error()
            if is_request:
                self.metrics.inc("errors")
                return error_response(error.code, error.message, caller_id, error.data)
            # Nothing is written (no topic made for a typo); the sender is told, as
            # for a request (a gateway or the ingress counts or dead-letters it).
            raise error from None
        if not is_request or route.kind is RouteKind.PUBSUB:
            await self.transport.publish(route.topic, event, key=route.key)
            if is_request:
                return result_response(
                    {"published": event.get_id(), "topic": route.topic}, caller_id
                )
            return None
        request_id, outgoing = self._request_event(event, route.agent_id, fresh)
        future = self.correlator.expect(request_id, timeout or self.request_timeout)
        self.metrics.requests += 1
        try:
            await self.transport.publish(route.topic, outgoing, key=route.key)
            response = await future
        except BaseException:
            self.correlator.cancel(request_id)
            raise
        return {"jsonrpc": "2.0", **response, "id": caller_id}

    async def open_stream(self, event: CloudEvent, *, timeout: float | None = None) -> ReplyStream:
        """Send a request whose handler streams; chunks arrive on the returned stream."""
        if not self._running:
            raise BusStopped("the bus is not running")
        try:
            route = self.route(event)
        except RoutingError as exc:
            stream = ReplyStream()
            stream.fail(exc.json_rpc_error())
            return stream
        request_id, outgoing = self._request_event(event, route.agent_id)
        stream = self.correlator.expect_stream(request_id, timeout or self.request_timeout)
        self.metrics.inc("requests")
        try:
            await self.transport.publish(route.topic, outgoing, key=route.key)
        except BaseException:
            self.correlator.cancel(request_id)
            raise
        stream.request_id = request_id
        return stream

    def _request_event(
        self, event: CloudEvent, agent_id: str | None, fresh: bool = False
    ) -> tuple[str, CloudEvent]:
        """``event`` (a copy unless ``fresh``) with an id unique in the bus and this
        node's reply topic."""
        attributes = event.get_attributes() if fresh else dict(event.get_attributes())
        request_id = new_id()
        attributes["id"] = request_id
        attributes[ext.REPLY_TO] = self.reply_topic
        if agent_id is not None:
            attributes[ext.TARGET_AGENT] = agent_id
        return request_id, event if fresh else new_event(attributes, event.get_data())

    # -- the reply topic: answers for this node's callers, cancels for its streams ----

    async def _on_reply(self, delivery: Delivery) -> None:
        event = delivery.event
        if event.get_extension(ext.METHOD) != CANCEL_METHOD:
            await self.correlator.on_reply(delivery)
            return
        data = event.get_data()
        params = data.get("params") if isinstance(data, dict) else None
        request_id = params.get("requestId") if isinstance(params, dict) else None
        stop = self.running_streams.get(request_id) if isinstance(request_id, str) else None
        if stop is not None:
            stop()
        else:  # it ended before the cancel came
            log.debug("stream/cancel for %r: no such stream running here", request_id)

    def _send_cancel(self, request_id: str, control: str) -> None:
        """Tell the node running a stream's generator to stop it (from the loop)."""
        if control == self.reply_topic:
            # Running here: stop it now rather than behind the chunks queued on
            # this node's reply topic.
            stop = self.running_streams.get(request_id)
            if stop is not None:
                stop()
            return
        if not self._running or not control.startswith(f"{self.topics.prefix}.reply."):
            return  # only a node's reply topic takes cancels
        item = self.adaptor.from_jsonrpc(cancel_message(request_id))[0]
        if not isinstance(item, CloudEvent):
            return
        task = asyncio.get_running_loop().create_task(self._publish_cancel(control, item))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _publish_cancel(self, control: str, event: CloudEvent) -> None:
        try:
            await self.transport.publish(control, event)
        except Exception as exc:  # the generator then runs to its end, unread
            log.warning("could not send stream/cancel to %s: %s", control, exc)


def _refuse_waiting_on(loop: asyncio.AbstractEventLoop, call: str) -> None:
    """Raise RuntimeError if ``call``, which blocks until work on ``loop`` (and the
    handlers it runs) ends, is made from that loop or from one of those handlers."""
    if _running_on(loop):
        raise RuntimeError(BLOCKING_ON_LOOP)
    if serving_loop() is loop:
        raise RuntimeError(
            f"{call} from a handler of this bus: it waits for the handlers to end, so"
            " it would wait for itself; stop the bus from outside its agents"
        )


def _running_on(loop: asyncio.AbstractEventLoop) -> bool:
    """True when the calling thread is running ``loop`` (a blocking wait would hang it)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
