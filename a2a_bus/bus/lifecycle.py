"""The start and stop of one bus, on the caller's loop or on a loop thread of its own.

The parts start in order on the bus loop (the transport, the reply and registry
subscriptions, the dispatcher, the agents) and stop in the reverse order once
in-flight work drained. A loop that ended without a stop leaves what stops
without it to :meth:`Lifecycle.stop`: the actors are told to stop, waiting
callers get BusStopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from a2a_bus.bus.hosts import Hosts
from a2a_bus.core.context import BusContext
from a2a_bus.core.dispatch import Dispatcher
from a2a_bus.discovery.directory import Directory
from a2a_bus.discovery.registry import follow_registry
from a2a_bus.hosting.actor import serving_loop
from a2a_bus.runtime.affinity import pin_current_thread
from a2a_bus.runtime.collector import young_threshold
from a2a_bus.runtime.portal import BLOCKING_ON_LOOP, BusStopped, LoopThread, Portal
from a2a_bus.transport.base import Subscription

# The package's logger ("a2a_bus.bus"), as before the bus was split into modules.
log = logging.getLogger(__package__)


class Lifecycle:
    """Starts and stops the parts of one bus; given the parts, never the bus."""

    def __init__(
        self,
        context: BusContext,
        dispatcher: Dispatcher,
        directory: Directory,
        hosted: Hosts,
        portal: Portal,
        *,
        registry_timeout: float,
        drain_timeout: float,
        pin_cpu: int | None,
        gc_threshold: int | None,
    ) -> None:
        self._context = context
        self._dispatcher = dispatcher
        self._directory = directory
        self._hosted = hosted
        self._portal = portal
        #: Seconds ``astart`` waits for the registry to be read to its end.
        self.registry_timeout = registry_timeout
        #: Seconds a stop waits for running handlers before it stops without them.
        self.drain_timeout = drain_timeout
        #: The loop thread that starts the bus and the actor threads stay on this CPU
        #: (see a2a_bus.runtime.affinity); None: off.
        self.pin_cpu = pin_cpu
        #: The garbage collector's young-generation threshold while the bus runs (see
        #: a2a_bus.runtime.collector); None: left alone.
        self.gc_threshold = gc_threshold
        self._holds_threshold = False
        self._subscriptions: list[Subscription] = []
        self._thread: LoopThread | None = None
        #: Set once what stops without the loop was stopped, after the loop ended.
        self._released = False

    @property
    def running(self) -> bool:
        """True from a start to its stop while the bus loop runs: false once that loop
        ended without a stop (stopped from inside, crashed, closed)."""
        return self._dispatcher.running and not self._loop_ended()

    def _loop_ended(self) -> bool:
        """The bus loop is gone: detached, closed, or (on the bus's own thread) no
        longer running. A caller's loop may pause between its runs: not ended."""
        loop = self._portal.attached
        if loop is None or loop.is_closed():
            return True
        return self._thread is not None and not loop.is_running()

    def _check_startable(self) -> None:
        """BusStopped if this bus was started and its loop ended without a stop: what
        ran on that loop cannot be stopped or restarted."""
        if self._dispatcher.running:
            raise BusStopped(
                "the bus loop ended without a stop, so this bus cannot start again: make a new Bus"
            )

    # -- on the bus loop ------------------------------------------------------------

    async def astart(self) -> None:
        """Start on the running loop (see :meth:`Bus.astart`)."""
        if self.running:
            return
        self._check_startable()
        self._portal.attach(asyncio.get_running_loop())
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
        context = self._context
        context.tracing.start()  # before anything sends: the SDK provider set by now
        transport, topics = context.transport, context.topics
        await transport.start()
        self._subscriptions.append(
            await transport.subscribe(
                [context.reply_topic],
                context.reply_topic,
                self._dispatcher.on_reply,
                max_in_flight=1024,
                durable=False,  # answers for this process's callers only
            )
        )
        self._subscriptions.append(
            await follow_registry(
                transport,
                topics.registry,
                f"{topics.registry}.{context.node}",
                self._directory,
                self.registry_timeout,
                announcer=self._hosted.announcer,
            )
        )
        # Running from here: an agent's on_start may already call other agents.
        self._dispatcher.open()
        await self._hosted.start()  # the hosts that did start are stopped by the shutdown

    async def astop(self) -> None:
        """Drain in-flight work, say goodbye on the registry, and disconnect."""
        if self.running:
            await self._shutdown()
        elif self._dispatcher.running:
            self._release_after_loop_ended()

    async def _shutdown(self) -> None:
        """Stop what is running (all of it after a start, part of it after a failed one)."""
        try:
            await self._stop_parts()
        finally:
            self._release_threshold()

    async def _stop_parts(self) -> None:
        await self._hosted.stop(self.drain_timeout)
        subscriptions, self._subscriptions = self._subscriptions, []
        self._dispatcher.drain()  # a stream reader that is behind does not hold the reply topic
        for subscription in subscriptions:
            await subscription.stop()
        await self._dispatcher.close()
        await self._context.transport.stop()

    def _release_threshold(self) -> None:
        if self._holds_threshold:
            self._holds_threshold = False
            young_threshold.release()

    def _release_after_loop_ended(self) -> None:
        """Stop what stops without the loop: the actors are told to stop (so the
        process can exit) and callers still waiting get BusStopped."""
        self._let_go("the bus loop ended before the bus was stopped")

    def _let_go(self, why: str) -> None:
        """End the loop thread, if the bus has one, and tell the actors to stop without
        waiting: their threads would otherwise keep the process alive."""
        if self._released:
            return
        self._released = True
        log.warning("%s: nothing is drained, the agents are told to stop", why)
        self.stop_thread()  # first: the actors are let go while no loop runs their hosts
        self._hosted.let_go()
        self._portal.detach()  # also when the loop was the caller's (astart)
        self._release_threshold()

    # -- from sync code: on a loop thread of the bus's own ----------------------------

    def start(self) -> None:
        """Start on a loop thread owned by the bus (see :meth:`Bus.start`)."""
        if self.running:
            return
        self._check_startable()
        self._thread = LoopThread(f"a2a-bus-{self._context.node}", on_end=self._portal.detach)
        self._portal.attach(self._thread.start())
        try:
            self._portal.run(self.astart())
        except BaseException:
            self.stop_thread()
            raise

    def stop(self) -> None:
        """Stop the bus started by :meth:`start` (see :meth:`Bus.stop`)."""
        if self._dispatcher.running and self._loop_ended():
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
            self._portal.run(self.astop())
        except BaseException:  # interrupted (a second Ctrl-C), or the stop failed
            self._let_go("the stop of the bus did not end")
            raise
        finally:
            self.stop_thread()

    def stop_thread(self) -> None:
        """End the bus's loop thread, if it has one, without stopping the parts."""
        thread, self._thread = self._thread, None
        if thread is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed by itself
                thread.stop()
            # Closed: later calls get BusStopped, not "loop is closed"; calls that
            # never ran or never ended are woken (no hang).
            self._portal.detach()

    def _refuse_waiting_on_loop(self, call: str) -> None:
        """Raise RuntimeError if ``call``, which blocks until work on the bus loop
        (and the handlers it runs) ends, is made from that loop or those handlers."""
        if self._portal.on_loop_thread():
            raise RuntimeError(BLOCKING_ON_LOOP)
        if serving_loop() is self._portal.attached:
            raise RuntimeError(
                f"{call} from a handler of this bus: it waits for the handlers to end, so"
                " it would wait for itself; stop the bus from outside its agents"
            )
