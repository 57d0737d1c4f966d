"""The Bus: the composition root of one process's part of the bus.

It builds the parts and passes each the collaborators it uses: the
:class:`~a2a_bus.core.context.BusContext` (transport, topic names, adaptor,
counters, node id), the :class:`~a2a_bus.core.dispatch.Dispatcher` (send,
route, correlate), the :class:`~a2a_bus.core.service.JsonRpcService` behind
every JSON-RPC front door, the discovery :class:`~a2a_bus.discovery.directory.Directory`,
the agents it hosts (:class:`~a2a_bus.bus.hosts.Hosts`), their
:class:`~a2a_bus.bus.lifecycle.Lifecycle`, and the
:class:`~a2a_bus.runtime.portal.Portal` into the bus loop. No part is given the
bus itself.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import uuid
from collections.abc import Sequence
from dataclasses import fields
from functools import partial
from typing import Any

from a2a_bus.bus.factories import env_kafka_transport, kafka_transport, memory_transport
from a2a_bus.bus.hosts import Hosts
from a2a_bus.bus.lifecycle import Lifecycle
from a2a_bus.bus.options import check_call_depth, check_seconds, drain_timeout_of, require_known
from a2a_bus.client import AsyncClient, Client
from a2a_bus.core.context import BusContext
from a2a_bus.core.dispatch import Dispatcher
from a2a_bus.core.metrics import Metrics
from a2a_bus.core.routing import Topics
from a2a_bus.core.service import JsonRpcService
from a2a_bus.discovery.directory import Directory
from a2a_bus.hosting.agent import Agent
from a2a_bus.hosting.host import AgentHost, Hosting
from a2a_bus.hosting.supervisor import RestartPolicy
from a2a_bus.protocol import DEFAULT_MAX_CALL_DEPTH, Adaptor
from a2a_bus.runtime.affinity import choose_cpu
from a2a_bus.runtime.collector import choose_threshold
from a2a_bus.runtime.portal import Portal
from a2a_bus.runtime.tracing import Tracing
from a2a_bus.schedule.kafka_owners import KafkaOwners
from a2a_bus.schedule.scheduler import Scheduler
from a2a_bus.schedule.spec import Schedule
from a2a_bus.settings import bus_options, transport_kind
from a2a_bus.transport.base import Transport
from a2a_bus.transport.kafka import KafkaSettings, KafkaTransport


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
        check_call_depth(max_call_depth)
        check_seconds("request_timeout", request_timeout, finite=False)
        check_seconds("heartbeat", heartbeat)
        check_seconds("registry_timeout", registry_timeout, zero=True)  # 0: do not wait
        if card_ttl is not None:
            check_seconds("card_ttl", card_ttl)
        drain_timeout = drain_timeout_of(transport, drain_timeout)
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
        self.directory = Directory(adaptor, card_ttl if card_ttl else 3 * heartbeat)
        #: Refuse messages to agents discovery does not know (``Directory.known``);
        #: from ``A2A_REQUIRE_KNOWN_AGENTS`` (default true) unless given.
        self.dispatcher = Dispatcher(
            self.context,
            self.directory,
            require_known_agents=require_known(require_known_agents),
        )
        self.service = JsonRpcService(self.dispatcher)
        self.portal = Portal()
        self._hosted = Hosts(self.context, self.directory, heartbeat)
        self.announcer = self._hosted.announcer
        self._lifecycle = Lifecycle(
            self.context,
            self.dispatcher,
            self.directory,
            self._hosted,
            self.portal,
            registry_timeout=registry_timeout,
            drain_timeout=drain_timeout,
            pin_cpu=choose_cpu(pin_cpu),
            gc_threshold=choose_threshold(gc_threshold),
        )
        self._aio = AsyncClient(self.dispatcher, self.service, self.portal)
        self._client = Client(self._aio, self.portal)
        self._hosting = Hosting(
            self.context,
            self.dispatcher,
            self.restart_policy,
            self.client,
            self._agent_scheduler,
            self._hosted.status_changed,
            drain_timeout,
        )

    # -- construction ---------------------------------------------------------------

    @classmethod
    def memory(cls, *, partitions: int = 4, retention: int = 100_000, **options: Any) -> Bus:
        """A bus on the in-process transport."""
        return cls(memory_transport(options, partitions=partitions, retention=retention), **options)

    @classmethod
    def kafka(
        cls,
        bootstrap: str | None = None,
        *,
        bus_options: dict[str, Any] | None = None,
        **kafka_options: Any,
    ) -> Bus:
        """A bus on Kafka; ``kafka_options`` are KafkaSettings fields (SASL/SSL too),
        the bus's own options go in ``bus_options``."""
        misplaced = sorted(set(kafka_options) & _BUS_ONLY_OPTIONS)
        if misplaced:
            given = ", ".join(f"{name}=..." for name in misplaced)
            raise TypeError(
                f"Bus.kafka() got {given}: options of the bus, not Kafka settings; "
                f"pass them as bus_options={{{', '.join(repr(n) + ': ...' for n in misplaced)}}}"
            )
        options = dict(bus_options or {})
        return cls(kafka_transport(bootstrap, options, kafka_options), **options)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Bus:
        """``A2A_TRANSPORT`` (memory|kafka; kafka when a bootstrap is set), ``A2A_PREFIX``,
        ``A2A_NODE``, ``A2A_REQUEST_TIMEOUT``, ``A2A_HEARTBEAT``, ``A2A_MAX_CALL_DEPTH``,
        ``A2A_PIN_CPU``; Kafka from ``A2A_KAFKA_*``."""
        env = os.environ if environ is None else environ
        options = bus_options(env)  # names a bad variable and its allowed values
        if transport_kind(env) == "memory":
            return cls.memory(**options)
        return cls(env_kafka_transport(env, options["prefix"]), **options)

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

    @property
    def hosts(self) -> list[AgentHost]:
        """The hosts of the agents spawned on this bus."""
        return self._hosted.hosts

    @property
    def registry_timeout(self) -> float:
        """Seconds ``astart`` waits for the registry to be read to its end."""
        return self._lifecycle.registry_timeout

    @property
    def drain_timeout(self) -> float:
        """Seconds a stop waits for running handlers before it stops without them."""
        return self._lifecycle.drain_timeout

    @property
    def pin_cpu(self) -> int | None:
        """The loop thread that starts the bus and the actor threads stay on this CPU
        (see a2a_bus.runtime.affinity); None: off. From ``A2A_PIN_CPU`` unless given."""
        return self._lifecycle.pin_cpu

    @property
    def gc_threshold(self) -> int | None:
        """The garbage collector's young-generation threshold while the bus runs (see
        a2a_bus.runtime.collector); None: left alone. From ``A2A_GC_THRESHOLD``."""
        return self._lifecycle.gc_threshold

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
            self.portal.run(self._hosted.add(host))
        else:
            self._hosted.record(host)
        return host

    async def aspawn(
        self, agent_cls: type[Agent], replicas: int = 1, *args: Any, **kwargs: Any
    ) -> AgentHost:
        host = AgentHost(self._hosting, agent_cls, replicas, args, kwargs)
        if self.dispatcher.running:
            await self.portal.on_loop(self._hosted.add(host))
        else:
            self._hosted.record(host)
        return host

    # -- lifecycle (see a2a_bus.bus.lifecycle) ----------------------------------------

    @property
    def running(self) -> bool:
        """True from a start to its stop while the bus loop runs: false once that loop
        ended without a stop (stopped from inside, crashed, closed)."""
        return self._lifecycle.running

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.portal.loop

    async def astart(self) -> None:
        """Start on the running loop: transport, reply and registry groups, agents.

        If it raises (an agent's constructor fails, the broker is unreachable),
        what it started is stopped again and the bus is not running.
        """
        await self._lifecycle.astart()

    async def astop(self) -> None:
        """Drain in-flight work, say goodbye on the registry, and disconnect."""
        await self._lifecycle.astop()

    def start(self) -> Bus:
        """Start on a loop thread owned by the bus (for sync code)."""
        self._lifecycle.start()
        return self

    def stop(self) -> None:
        """Stop the bus started by :meth:`start`, after in-flight work drained.

        Refused (RuntimeError, at once) on the bus loop and in the bus's own
        handlers: it waits for them, so it would wait for itself.
        """
        self._lifecycle.stop()

    def _stop_thread(self) -> None:
        self._lifecycle.stop_thread()

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


#: Options of ``Bus`` alone: given to :meth:`Bus.kafka` as Kafka settings, they are
#: a mistake worth naming (``drain_timeout`` is both, and goes to the transport).
_BUS_ONLY_OPTIONS = frozenset(inspect.signature(Bus.__init__).parameters) - {
    "self",
    "transport",
    *(setting.name for setting in fields(KafkaSettings)),
}

__all__ = ["Bus"]
