"""The Bus: the composition root of one process's part of the bus, and its lifecycle.

It builds the parts and passes each the collaborators it uses: the
:class:`~a2a_bus.core.context.BusContext` (transport, topic names, adaptor,
counters, node id), the :class:`~a2a_bus.core.dispatch.Dispatcher` (send,
route, correlate), the :class:`~a2a_bus.core.service.JsonRpcService` behind
every JSON-RPC front door, the discovery :class:`~a2a_bus.discovery.directory.Directory`,
the process's inbox consumer, and the :class:`~a2a_bus.runtime.portal.Portal`
into the bus loop. No part is given the bus itself.

One asyncio loop per process owns all I/O. Used from async code
(``async with bus:``) the bus runs on the current loop; used from sync code
(``with bus:`` or ``bus.start()``) it starts and owns a loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from a2a_bus.client import AsyncClient, Client
from a2a_bus.core.context import BusContext
from a2a_bus.core.dispatch import Dispatcher
from a2a_bus.core.metrics import Metrics
from a2a_bus.core.routing import Topics
from a2a_bus.core.service import JsonRpcService
from a2a_bus.discovery.directory import (
    REQUIRE_KNOWN_ENV,
    Announcer,
    Directory,
)
from a2a_bus.discovery.registry import follow_registry
from a2a_bus.hosting.actor import serving_loop
from a2a_bus.hosting.agent import Agent
from a2a_bus.hosting.host import AgentHost, Hosting
from a2a_bus.hosting.supervisor import RestartPolicy
from a2a_bus.protocol import DEFAULT_MAX_CALL_DEPTH, Adaptor
from a2a_bus.runtime.affinity import choose_cpu, pin_current_thread
from a2a_bus.runtime.collector import choose_threshold, young_threshold
from a2a_bus.runtime.env import EnvError, switch
from a2a_bus.runtime.portal import BLOCKING_ON_LOOP, BusStopped, LoopThread, Portal
from a2a_bus.runtime.tracing import Tracing
from a2a_bus.schedule.kafka_owners import KafkaOwners
from a2a_bus.schedule.scheduler import Scheduler
from a2a_bus.schedule.spec import Schedule
from a2a_bus.settings import bus_options, transport_kind
from a2a_bus.transport.base import Inboxes, Subscription, Transport
from a2a_bus.transport.kafka import KafkaSettings, KafkaTransport
from a2a_bus.transport.kafka.broker import check_topic_name
from a2a_bus.transport.kafka.config import ENV_PREFIX as KAFKA_ENV_PREFIX
from a2a_bus.transport.memory import MemoryTransport

log = logging.getLogger(__name__)

#: The dead-letter topic's variable: without it each prefix has its own.
DLQ_ENV = KAFKA_ENV_PREFIX + "DLQ_TOPIC"
#: Seconds a stop waits for running handlers unless the bus is told otherwise (on
#: Kafka: the transport's ``drain_timeout``).
DEFAULT_DRAIN_TIMEOUT = 10.0


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
        gc_threshold: int | str | None = None,
        require_known_agents: bool | None = None,
        registry_timeout: float = 10.0,
        max_call_depth: int = DEFAULT_MAX_CALL_DEPTH,
        tracer_provider: Any = None,
        drain_timeout: float | None = None,
    ) -> None:
        if type(max_call_depth) is not int or max_call_depth < 1:
            raise ValueError(f"max_call_depth must be an integer >= 1, not {max_call_depth!r}")
        # Checked here, not where they are used: a 0 heartbeat would spin a core, a 0
        # timeout fail every later call, each far from the mistake.
        _check_seconds("request_timeout", request_timeout, finite=False)
        _check_seconds("heartbeat", heartbeat)
        _check_seconds("registry_timeout", registry_timeout, zero=True)  # 0: do not wait
        if card_ttl is not None:
            _check_seconds("card_ttl", card_ttl)
        if drain_timeout is None:  # one setting bounds the whole stop: on Kafka, the transport's
            drain_timeout = DEFAULT_DRAIN_TIMEOUT
            if isinstance(transport, KafkaTransport):
                drain_timeout = transport.settings.drain_timeout
        _check_seconds("drain_timeout", drain_timeout, finite=False, zero=True)
        topics = Topics(prefix)
        transport.declare_compacted(topics.registry)  # one card per agent id
        adaptor = adaptor or Adaptor()
        self.context = BusContext(
            transport,
            topics,
            adaptor,
            Metrics(),
            node or uuid.uuid4().hex[:12],
            request_timeout,
            max_call_depth,
            # An OpenTelemetry SDK's TracerProvider; else the global one at start.
            Tracing(tracer_provider),
        )
        transport.declare_private(self.context.reply_topic)  # answers for this node alone
        self.heartbeat = heartbeat
        self.restart_policy = restart_policy or RestartPolicy()
        #: The loop thread that starts the bus and the actor threads stay on this CPU
        #: (see a2a_bus.runtime.affinity); None: off. From ``A2A_PIN_CPU`` unless given.
        self.pin_cpu = choose_cpu(pin_cpu)
        #: The garbage collector's young-generation threshold while the bus runs (see
        #: a2a_bus.runtime.collector); None: left alone. From ``A2A_GC_THRESHOLD``.
        self.gc_threshold = choose_threshold(gc_threshold)
        self._holds_threshold = False
        self.directory = Directory(adaptor, card_ttl if card_ttl else 3 * heartbeat)
        #: Refuse messages to agents discovery does not know (``Directory.known``);
        #: from ``A2A_REQUIRE_KNOWN_AGENTS`` (default true) unless given.
        self.dispatcher = Dispatcher(
            self.context,
            self.directory,
            require_known_agents=_require_known(require_known_agents),
        )
        self.service = JsonRpcService(self.dispatcher)
        self.portal = Portal()
        self.announcer = Announcer(transport, topics.registry, adaptor, heartbeat, self._cards)
        #: Seconds ``astart`` waits for the registry to be read to its end.
        self.registry_timeout = registry_timeout
        #: Seconds a stop waits for running handlers before it stops without them.
        self.drain_timeout = drain_timeout
        self.hosts: list[AgentHost] = []
        self._host_ids: set[str] = set()
        self._aio = AsyncClient(self.dispatcher, self.service, self.portal)
        self._client = Client(self._aio, self.portal)
        self._hosting = Hosting(
            self.context,
            self.dispatcher,
            self.restart_policy,
            self.client,
            self._agent_scheduler,
            self._status_changed,
            drain_timeout,
        )
        self._subscriptions: list[Subscription] = []
        #: The inbox consumer of the current start (one per process on Kafka).
        self._inboxes: Inboxes | None = None
        self._thread: LoopThread | None = None
        #: Set once what stops without the loop was stopped, after the loop ended.
        self._released = False

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
        options = dict(bus_options or {})
        kafka_options.setdefault("dlq_topic", Topics(options.get("prefix", "a2a")).dlq)
        return cls(KafkaTransport(bootstrap, **kafka_options), **options)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Bus:
        """``A2A_TRANSPORT`` (memory|kafka; kafka when a bootstrap is set), ``A2A_PREFIX``,
        ``A2A_NODE``, ``A2A_REQUEST_TIMEOUT``, ``A2A_HEARTBEAT``, ``A2A_MAX_CALL_DEPTH``,
        ``A2A_PIN_CPU``; Kafka from ``A2A_KAFKA_*``."""
        env = os.environ if environ is None else environ
        options = bus_options(env)  # names a bad variable and its allowed values
        if transport_kind(env) == "memory":
            return cls.memory(**options)
        settings = KafkaSettings.from_env(env, dlq_topic=dlq_topic(env, options["prefix"]))
        return cls(KafkaTransport(settings=settings), **options)

    # -- what the parts share (read-only views for callers and tests) -------------------

    @property
    def transport(self) -> Transport:
        return self.context.transport

    @property
    def topics(self) -> Topics:
        return self.context.topics

    @property
    def adaptor(self) -> Adaptor:
        return self.context.adaptor

    @property
    def metrics(self) -> Metrics:
        return self.context.metrics

    @property
    def node(self) -> str:
        return self.context.node

    @property
    def source(self) -> str:
        return self.context.source

    @property
    def reply_topic(self) -> str:
        return self.context.reply_topic

    @property
    def request_timeout(self) -> float:
        return self.context.request_timeout

    # -- agents ---------------------------------------------------------------------

    def spawn(
        self, agent_cls: type[Agent], replicas: int = 1, *args: Any, **kwargs: Any
    ) -> AgentHost:
        """Host ``replicas`` actors of ``agent_cls`` (constructor gets ``args``/``kwargs``).

        Before ``start()`` it is recorded; on a running bus it starts now (from
        the bus's own loop use ``await bus.aspawn(...)``).
        """
        host = AgentHost(self._hosting, agent_cls, replicas, args, kwargs)
        if self.dispatcher.running:  # started (if its loop ended, the portal says so)
            self.portal.run(self._add_host(host))
        else:
            self._record(host)
        return host

    async def aspawn(
        self, agent_cls: type[Agent], replicas: int = 1, *args: Any, **kwargs: Any
    ) -> AgentHost:
        host = AgentHost(self._hosting, agent_cls, replicas, args, kwargs)
        if self.dispatcher.running:
            await self.portal.on_loop(self._add_host(host))
        else:
            self._record(host)
        return host

    def _record(self, host: AgentHost) -> None:
        """Host ``host`` from now on; ValueError when this bus hosts its id already
        (two hosts would share its inbox, each taking calls meant for the other)."""
        if host.agent_id in self._host_ids:
            raise ValueError(
                f"agent {host.agent_id!r} is hosted on this bus already: one host per agent "
                "id (spawn(cls, replicas=N) runs more actors of it)"
            )
        self._host_ids.add(host.agent_id)
        self.hosts.append(host)

    def _cards(self) -> list[dict[str, Any]]:
        """The heartbeat's cards: agents that started (none for one still starting,
        which may yet fail)."""
        return [host.card() for host in self.hosts if self.directory.hosts(host.agent_id)]

    async def _add_host(self, host: AgentHost) -> None:
        """Start ``host`` on the running bus; if it fails it is not hosted at all."""
        self._record(host)
        try:
            await self._start_host(host)
        except BaseException:
            self.hosts.remove(host)
            self._host_ids.discard(host.agent_id)
            raise

    async def _start_host(self, host: AgentHost) -> None:
        """Start ``host`` and announce it; if that fails, stop what it started."""
        self.directory.expect_local(host.agent_id)
        try:
            await host.start(self._started_inboxes())
            card = host.card()
            self.directory.add_local(card)
            await self.announcer.announce(card)
        except BaseException:
            await self._stop_host(host)
            raise

    def _started_inboxes(self) -> Inboxes:
        if self._inboxes is None:
            self._inboxes = self.transport.inboxes(f"{self.topics.prefix}.inbox")
        return self._inboxes

    def _status_changed(self, host: AgentHost) -> None:
        """A replica of ``host`` gave up: its card says so here and on the registry."""
        if self.directory.hosts(host.agent_id):  # else its card, when made, says so
            card = host.card()
            self.directory.add_local(card)
            self.announcer.announce_soon(card)

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
        """True from a start to its stop while the bus loop runs: false once that loop
        ended without a stop (stopped from inside, crashed, closed)."""
        return self.dispatcher.running and not self._loop_ended()

    def _loop_ended(self) -> bool:
        """The bus loop is gone: detached, closed, or (on the bus's own thread) no
        longer running. A caller's loop may pause between its runs: not ended."""
        loop = self.portal.attached
        if loop is None or loop.is_closed():
            return True
        return self._thread is not None and not loop.is_running()

    def _check_startable(self) -> None:
        """BusStopped if this bus was started and its loop ended without a stop: what
        ran on that loop cannot be stopped or restarted."""
        if self.dispatcher.running:
            raise BusStopped(
                "the bus loop ended without a stop, so this bus cannot start again: make a new Bus"
            )

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.portal.loop

    async def astart(self) -> None:
        """Start on the running loop: transport, reply and registry groups, agents.

        If it raises (an agent's constructor fails, the broker is unreachable),
        what it started is stopped again and the bus is not running.
        """
        if self.running:
            return
        self._check_startable()
        self.portal.attach(asyncio.get_running_loop())
        if self.pin_cpu is not None:
            # This loop's thread; the threads it starts from now on (the actors) inherit it.
            pin_current_thread(self.pin_cpu)
        if self.gc_threshold is not None:
            young_threshold.hold(self.gc_threshold)
            self._holds_threshold = True
        try:
            await self._start_parts()
        except BaseException:
            try:
                await self._shutdown()
            except Exception:  # the start's own error is the one to raise
                log.exception("stopping a bus whose start failed")
            raise

    async def _start_parts(self) -> None:
        context = self.context
        context.tracing.start()  # before anything sends: the SDK provider set by now
        transport, topics = context.transport, context.topics
        await transport.start()
        self._subscriptions.append(
            await transport.subscribe(
                [context.reply_topic],
                context.reply_topic,
                self.dispatcher.on_reply,
                max_in_flight=1024,
                durable=False,  # answers for this process's callers only
            )
        )
        self._subscriptions.append(
            await follow_registry(
                transport,
                topics.registry,
                f"{topics.registry}.{context.node}",
                self.directory,
                self.registry_timeout,
                announcer=self.announcer,
            )
        )
        # Running from here: an agent's on_start may already call other agents.
        self.dispatcher.open()
        # All at once: on Kafka the inbox subscriptions made together cost one join of
        # the process's inbox group, not one each.
        started = await asyncio.gather(
            *(self._start_host(host) for host in list(self.hosts)), return_exceptions=True
        )
        for outcome in started:
            if isinstance(outcome, BaseException):
                raise outcome  # the hosts that did start are stopped by the shutdown
        self.announcer.start()

    async def astop(self) -> None:
        """Drain in-flight work, say goodbye on the registry, and disconnect."""
        if self.running:
            await self._shutdown()
        elif self.dispatcher.running:
            self._release_after_loop_ended()

    async def _shutdown(self) -> None:
        """Stop what is running (all of it after a start, part of it after a failed one)."""
        try:
            await self._stop_parts()
        finally:
            if self._holds_threshold:
                self._holds_threshold = False
                young_threshold.release()

    async def _stop_parts(self) -> None:
        await self.announcer.stop()
        for host in self.hosts:  # all said gone first: no new work while they drain
            await self._withdraw(host)
            for replica in host.replicas:
                # Before the host drains its deliveries: one waiting for an agent
                # that cannot start would wait forever.
                replica.begin_stop()
        grace = None
        if not math.isinf(self.drain_timeout):
            loop = asyncio.get_running_loop()
            grace = loop.call_later(self.drain_timeout, self._abandon_handlers)
        try:
            for host in self.hosts:
                await host.stop()
        finally:
            if grace is not None:
                grace.cancel()
        inboxes, self._inboxes = self._inboxes, None
        if inboxes is not None:
            await inboxes.stop()
        subscriptions, self._subscriptions = self._subscriptions, []
        self.dispatcher.drain()  # a stream reader that is behind does not hold the reply topic
        for subscription in subscriptions:
            await subscription.stop()
        await self.dispatcher.close()
        await self.context.transport.stop()

    def _abandon_handlers(self) -> None:
        """The stop waited ``drain_timeout`` for handlers that still run: it goes on
        without them (their messages dead-lettered, a request answered -32002)."""
        running = [held for host in self.hosts for held in host.holding()]
        if not running:
            return
        log.warning(
            "stopping without the handlers (and on_stop hooks) still running after the %g s"
            " drain timeout: %s;"
            " their messages are dead-lettered, their threads left to end by themselves",
            self.drain_timeout,
            ", ".join(running),
        )
        reason = f"the bus stopped after waiting {self.drain_timeout:g} s for its handler"
        for host in self.hosts:
            host.abandon(reason)

    def _release_after_loop_ended(self) -> None:
        """Stop what stops without the loop: the actors are told to stop (so the
        process can exit) and callers still waiting get BusStopped."""
        if self._released:
            return
        self._released = True
        log.warning(
            "the bus loop ended before the bus was stopped: nothing is drained, the agents"
            " are told to stop"
        )
        for host in self.hosts:
            host.let_go()
        self._stop_thread()
        self.portal.detach()  # also when the loop was the caller's (astart)
        if self._holds_threshold:
            self._holds_threshold = False
            young_threshold.release()

    def start(self) -> Bus:
        """Start on a loop thread owned by the bus (for sync code)."""
        if self.running:
            return self
        self._check_startable()
        self._thread = LoopThread(f"a2a-bus-{self.node}", on_end=self.portal.detach)
        self.portal.attach(self._thread.start())
        try:
            self.portal.run(self.astart())
        except BaseException:
            self._stop_thread()
            raise
        return self

    def stop(self) -> None:
        """Stop the bus started by :meth:`start`, after in-flight work drained.

        Refused (RuntimeError, at once) on the bus loop and in the bus's own
        handlers: it waits for them, so it would wait for itself.
        """
        if self.dispatcher.running and self._loop_ended():
            self._release_after_loop_ended()
            return
        if self._thread is None:
            if self.running:  # started by astart(): its loop is the caller's, not ours
                raise RuntimeError(
                    "this bus was started with astart(): stop it with await bus.astop() "
                    "on the loop that started it"
                )
            return
        self._refuse_waiting_on_loop("bus.stop()")
        try:
            self.portal.run(self.astop())
        finally:
            self._stop_thread()

    def _stop_thread(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed by itself
                thread.stop()
            # Closed: later calls get BusStopped, not "loop is closed"; calls that
            # never ran or never ended are woken (no hang).
            self.portal.detach()

    def _refuse_waiting_on_loop(self, call: str) -> None:
        """Raise RuntimeError if ``call``, which blocks until work on the bus loop
        (and the handlers it runs) ends, is made from that loop or those handlers."""
        if self.portal.on_loop_thread():
            raise RuntimeError(BLOCKING_ON_LOOP)
        if serving_loop() is self.portal.attached:
            raise RuntimeError(
                f"{call} from a handler of this bus: it waits for the handlers to end, so"
                " it would wait for itself; stop the bus from outside its agents"
            )

    def __enter__(self) -> Bus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Bus:
        await self.astart()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.astop()

    # -- clients --------------------------------------------------------------------

    def client(self) -> Client:
        """The sync client of this bus (for threads other than the bus loop)."""
        return self._client

    def async_client(self) -> AsyncClient:
        """An async client of this bus (from the bus loop or any other loop)."""
        return AsyncClient(self.dispatcher, self.service, self.portal)

    # -- schedules ------------------------------------------------------------------

    def scheduler(self, schedules: Sequence[Schedule], *, group: str = "default") -> Scheduler:
        """A scheduler firing ``schedules`` as ``group`` on this bus: use it as an
        (async) context manager on a running bus. On Kafka every process that runs
        the group shares its schedules, each fired once (see :mod:`a2a_bus.schedule`)."""
        transport = self.transport
        owners = partial(KafkaOwners, transport) if isinstance(transport, KafkaTransport) else None
        return Scheduler(
            self.dispatcher, self._aio, self.portal, schedules, group=group, owners=owners
        )

    def _agent_scheduler(self, schedules: Sequence[Schedule], agent_id: str) -> Scheduler:
        return self.scheduler(schedules, group=agent_id)


def _check_seconds(name: str, value: Any, *, finite: bool = True, zero: bool = False) -> None:
    """TypeError unless ``value`` is a number, ValueError unless it is positive (or,
    with ``zero``, 0) and, with ``finite``, not infinite; NaN is none of these."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, not {value!r}")
    if not (value >= 0 if zero else value > 0) or (finite and math.isinf(value)):
        kind = ("non-negative" if zero else "positive") + (" finite" if finite else "")
        raise ValueError(f"{name} must be a {kind} number of seconds, not {value!r}")


def _require_known(given: bool | str | None) -> bool:
    """Whether messages to unknown agents are refused: ``given`` (a flag, or the words
    the environment takes), else ``A2A_REQUIRE_KNOWN_AGENTS``; true when neither says
    (empty is unset, as for every variable)."""
    if isinstance(given, bool):
        return given
    found = switch(os.environ if given is None else {REQUIRE_KNOWN_ENV: given}, REQUIRE_KNOWN_ENV)
    return True if found is None else found


def dlq_topic(env: Mapping[str, str], prefix: str) -> str:
    """``A2A_KAFKA_DLQ_TOPIC`` when set (EnvError if Kafka would refuse the name),
    else the prefix's own dead-letter topic."""
    topic = env.get(DLQ_ENV, "").strip()
    if not topic:
        return Topics(prefix).dlq
    try:
        check_topic_name(topic)
    except ValueError as exc:
        raise EnvError(f"{DLQ_ENV}={env[DLQ_ENV]!r}: {exc}") from None
    return topic


__all__ = ["Bus"]
