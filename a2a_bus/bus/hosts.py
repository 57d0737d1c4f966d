"""The agents one bus hosts: recorded when spawned, started and announced on the
registry, said gone and drained when the bus stops."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import Any

from a2a_bus.core.context import BusContext
from a2a_bus.discovery.announcer import Announcer
from a2a_bus.discovery.directory import Directory
from a2a_bus.hosting.host import AgentHost
from a2a_bus.transport.base import Inboxes

# The package's logger ("a2a_bus.bus"), as before the bus was split into modules.
log = logging.getLogger(__package__)


class Hosts:
    """The :class:`AgentHost` of each agent spawned on one bus, and their cards."""

    def __init__(self, context: BusContext, directory: Directory, heartbeat: float) -> None:
        self._context = context
        self._directory = directory
        #: Publishes the cards of the agents that started, every ``heartbeat`` seconds.
        self.announcer = Announcer(
            context.transport, context.topics.registry, context.adaptor, heartbeat, self.cards
        )
        self.hosts: list[AgentHost] = []
        self._ids: set[str] = set()
        #: The inbox consumer of the current start (one per process on Kafka).
        self._inboxes: Inboxes | None = None

    def record(self, host: AgentHost) -> None:
        """Host ``host`` from now on; ValueError when this bus hosts its id already
        (two hosts would share its inbox, each taking calls meant for the other)."""
        if host.agent_id in self._ids:
            raise ValueError(
                f"agent {host.agent_id!r} is hosted on this bus already: one host per agent "
                "id (spawn(cls, replicas=N) runs more actors of it)"
            )
        self._ids.add(host.agent_id)
        self.hosts.append(host)

    def cards(self) -> list[dict[str, Any]]:
        """The heartbeat's cards: agents that started (none for one still starting,
        which may yet fail)."""
        return [host.card() for host in self.hosts if self._directory.hosts(host.agent_id)]

    async def add(self, host: AgentHost) -> None:
        """Start ``host`` on the running bus; if it fails it is not hosted at all."""
        self.record(host)
        try:
            await self._start(host)
        except BaseException:
            self.hosts.remove(host)
            self._ids.discard(host.agent_id)
            raise

    async def start(self) -> None:
        """Start every recorded host, then the heartbeat; the first failure is raised
        (the hosts that did start are left to :meth:`stop`)."""
        # All at once: on Kafka the inbox subscriptions made together cost one join of
        # the process's inbox group, not one each.
        started = await asyncio.gather(
            *(self._start(host) for host in list(self.hosts)), return_exceptions=True
        )
        for outcome in started:
            if isinstance(outcome, BaseException):
                raise outcome
        self.announcer.start()

    async def _start(self, host: AgentHost) -> None:
        """Start ``host`` and announce it; if that fails, stop what it started."""
        self._directory.expect_local(host.agent_id)
        try:
            await host.start(self._started_inboxes())
            card = host.card()
            self._directory.add_local(card)
            await self.announcer.announce(card)
        except BaseException:
            await self._withdraw(host)
            await host.stop()
            raise

    def _started_inboxes(self) -> Inboxes:
        if self._inboxes is None:
            self._inboxes = self._context.transport.inboxes(f"{self._context.topics.prefix}.inbox")
        return self._inboxes

    def status_changed(self, host: AgentHost) -> None:
        """A replica of ``host`` gave up: its card says so here and on the registry."""
        if self._directory.hosts(host.agent_id):  # else its card, when made, says so
            card = host.card()
            self._directory.add_local(card)
            self.announcer.announce_soon(card)

    async def _withdraw(self, host: AgentHost) -> None:
        """Say "gone" on the registry if ``host`` was announced; route no more to it here."""
        if self._directory.hosts(host.agent_id):
            with contextlib.suppress(Exception):
                await self.announcer.announce(host.card(), gone=True)
        self._directory.remove_local(host.agent_id)

    async def stop(self, drain_timeout: float) -> None:
        """Stop the heartbeat, say every host gone, stop them after their handlers
        ended (at most ``drain_timeout`` seconds), then the inbox consumer."""
        await self.announcer.stop()
        for host in self.hosts:  # all said gone first: no new work while they drain
            await self._withdraw(host)
            for replica in host.replicas:
                # Before the host drains its deliveries: one waiting for an agent
                # that cannot start would wait forever.
                replica.begin_stop()
        grace = None
        if not math.isinf(drain_timeout):
            loop = asyncio.get_running_loop()
            grace = loop.call_later(drain_timeout, self._abandon_handlers, drain_timeout)
        try:
            for host in self.hosts:
                await host.stop()
        finally:
            if grace is not None:
                grace.cancel()
        inboxes, self._inboxes = self._inboxes, None
        if inboxes is not None:
            await inboxes.stop()

    def _abandon_handlers(self, drain_timeout: float) -> None:
        """The stop waited ``drain_timeout`` for handlers that still run: it goes on
        without them (their messages dead-lettered, a request answered -32002)."""
        running = [held for host in self.hosts for held in host.holding()]
        if not running:
            return
        log.warning(
            "stopping without the handlers (and on_start or on_stop hooks) still running"
            " after the %g s drain timeout: %s;"
            " their messages are dead-lettered, their threads left to end by themselves",
            drain_timeout,
            ", ".join(running),
        )
        reason = f"the bus stopped after waiting {drain_timeout:g} s for its handler"
        for host in self.hosts:
            host.abandon(reason)

    def let_go(self) -> None:
        """The bus loop is gone: every host's actors are told to stop, nothing waited for."""
        for host in self.hosts:
            host.let_go()
