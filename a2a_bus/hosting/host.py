"""The agent side of the bus: one :class:`AgentHost` per spawned agent class.

The host consumes the agent's inbox (``<prefix>.agent.<id>``) through the
process's :class:`~a2a_bus.transport.base.Inboxes` (replicas in several
processes share it) and one group per ``@subscribe`` handler (every subscriber
gets every event), and hands each message to the least busy of its replicas,
each a supervised pykka actor. It turns deliveries into jobs, answers requests
on the caller's reply topic (or, for a caller in this process on the in-process
transport, straight to the dispatcher), streams generator results, feeds caller
streams to handlers, and writes dead messages to the dead-letter topic with the
reason (:mod:`a2a_bus.hosting.answering`).

Answers, chunks and dead letters continue the trace of the message they answer.
With an OpenTelemetry SDK each delivery is handled in a span of its own
(:mod:`a2a_bus.hosting.delivery_spans`), current in the handler's thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import methodcaller
from typing import Any

from a2a_bus.client import Client
from a2a_bus.core.context import BusContext
from a2a_bus.core.dispatch import Dispatcher
from a2a_bus.discovery.directory import DEGRADED, FAILED, RUNNING
from a2a_bus.hosting.actor import Job, Outcome
from a2a_bus.hosting.agent import Agent, SubscriptionSpec, check_spawn
from a2a_bus.hosting.answering import Answering
from a2a_bus.hosting.delivery_spans import DeliverySpans
from a2a_bus.hosting.inbound import InboundStreams, is_stream_part
from a2a_bus.hosting.outbound import OutboundStreams, carried
from a2a_bus.hosting.supervisor import Replica, RestartPolicy
from a2a_bus.hosting.task_runs import TaskMarks
from a2a_bus.protocol import ErrorCode, JsonRpcError, ext, jsonrpc_of
from a2a_bus.runtime import tracing
from a2a_bus.schedule.scheduler import Scheduler
from a2a_bus.schedule.spec import Schedule
from a2a_bus.transport.base import Delivery, Inboxes, Subscription

log = logging.getLogger(__name__)

_SESSION = ext.SESSION
_TASK_ID = ext.TASK_ID


@dataclass(frozen=True, slots=True)
class Hosting:
    """What the agent hosts of one bus share: passed to each, never the bus itself."""

    context: BusContext
    #: Answers callers in this process, and tracks the generators streaming from here.
    dispatcher: Dispatcher
    policy: RestartPolicy
    #: Makes the sync client each agent instance gets as ``agent.client``.
    client: Callable[[], Client]
    #: Makes the scheduler of an agent's schedules (``Bus.scheduler``).
    scheduler: Callable[[Sequence[Schedule], str], Scheduler]
    #: Told (on the loop) when a host's status changed: a replica's start failed, it
    #: started again, or it gave up starting.
    status_changed: Callable[[AgentHost], None] = lambda host: None
    #: Seconds a stop waits for an agent's ``on_stop`` (the bus's ``drain_timeout``).
    drain_timeout: float = math.inf


class AgentHost:
    """Runs ``replicas`` supervised actors of one agent class on a bus."""

    def __init__(
        self,
        hosting: Hosting,
        agent_cls: type[Agent],
        replicas: int = 1,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        check_spawn(agent_cls, replicas)
        self.hosting = hosting
        self._context = hosting.context
        #: The bus's tracer is ``tracer`` (None without an OpenTelemetry SDK: no spans).
        self._tracing = hosting.context.tracing
        self._dispatcher = hosting.dispatcher
        self.agent_cls = agent_cls
        self.agent_id = agent_cls.agent_id
        self._methods = agent_cls.methods
        self._metrics = hosting.context.metrics
        self.replica_count = replicas
        self._args = tuple(args)
        self._kwargs = dict(kwargs or {})
        self.replicas: list[Replica] = []
        #: The replicas messages go to: those that run (all, when none does).
        self._serving: list[Replica] = []
        self._subscriptions: list[Subscription] = []
        self._spans = DeliverySpans(hosting.context, self.agent_id)
        answering = self._answering = Answering(
            hosting.context, hosting.dispatcher, self.agent_id, self._spans
        )
        self.inbound = InboundStreams(agent_cls, answering.answer)
        self.outbound = OutboundStreams(
            hosting.context, hosting.dispatcher, self.agent_id, answering.dead_letter
        )
        #: Replicas whose mailbox is full: the inbox pauses once all of them are.
        self._full: set[Replica] = set()
        self._scheduler: Scheduler | None = None
        self._class_card: dict[str, Any] | None = None

    # -- lifecycle ------------------------------------------------------------------

    def card(self) -> dict[str, Any]:
        """The agent's card as announced now: the class's (built once: its method
        schemas cost ~90 µs and a heartbeat re-announces every agent) with this
        process's node, replica count, time and status."""
        if self._class_card is None:
            self._class_card = self.agent_cls.card()
        card = {
            **self._class_card,
            "node": self._context.node,
            "replicas": self.replica_count,
            "heartbeatAt": time.time(),
            "status": self.status,
        }
        failure = self.failure
        if failure is not None:
            card["failure"] = failure
        return card

    @property
    def status(self) -> str:
        """``running``; ``degraded`` when some replicas do not run (they gave up
        starting, or their latest start failed and they are restarted: the others
        take the messages, or, when none runs, the messages end as the replicas'
        jobs do); ``failed`` when all gave up (messages are answered -32002)."""
        replicas = self.replicas
        failed = sum(replica.failure is not None for replica in replicas)
        if failed and failed == len(replicas):
            return FAILED
        if failed or any(replica.not_started is not None for replica in replicas):
            return DEGRADED
        return RUNNING

    @property
    def failure(self) -> str | None:
        """Why a replica gave up starting the agent (the first one's reason), else why
        one is not running now, or None."""
        gave_up = next((r.failure for r in self.replicas if r.failure is not None), None)
        if gave_up is not None:
            return gave_up
        return next((r.not_started for r in self.replicas if r.not_started is not None), None)

    def _replica_status(self) -> None:
        serving = [r for r in self.replicas if r.failure is None and r.not_started is None]
        self._serving = serving or list(self.replicas)
        self.hosting.status_changed(self)

    def holding(self) -> list[str]:
        """The replicas holding jobs now, each with what the jobs handle (``x#0 (ping)``)."""
        held = ((replica.name, replica.holding()) for replica in self.replicas)
        return [f"{name} ({', '.join(labels)})" for name, labels in held if labels]

    def abandon(self, reason: str) -> None:
        """Stop without waiting any longer for the jobs the replicas hold (see
        :meth:`Replica.abandon`)."""
        for replica in self.replicas:
            if replica.holding():
                replica.abandon(reason)

    def let_go(self) -> None:
        """The bus loop is gone: the actors are told to stop, nothing is waited for."""
        for replica in self.replicas:
            replica.let_go()

    def _new_agent(self) -> Agent:
        agent = self.agent_cls(*self._args, **self._kwargs)
        agent.client = self.hosting.client()
        return agent

    async def start(self, inboxes: Inboxes) -> None:
        """Start the replicas, then consume the inbox (through the process's inbox
        consumer of this start of the bus) and the subscribed subjects."""
        hosting, topics = self.hosting, self._context.topics
        mailbox = self.agent_cls.mailbox_size
        for index in range(self.replica_count):
            replica = Replica(
                self._new_agent,
                name=f"{self.agent_id}#{index}",
                mailbox_size=mailbox,
                policy=hosting.policy,
                metrics=self._context.metrics,
                on_pressure=functools.partial(self._pressure, index),
                tracer=self._tracing.tracer,
                on_status=self._replica_status,
                drain_timeout=hosting.drain_timeout,
            )
            replica.start()
            self.replicas.append(replica)
        self._serving = list(self.replicas)
        in_flight = mailbox * self.replica_count
        self._subscriptions.append(
            await inboxes.subscribe(
                topics.agent(self.agent_id),
                self._spans.traced(self._on_inbox, f"{topics.prefix}.inbox"),
                max_in_flight=in_flight,
            )
        )
        for number, spec in enumerate(self.agent_cls.subscriptions):
            target = topics.subscription(spec.subject)
            group = f"{topics.prefix}.sub.{self.agent_id}.{spec.attribute}.{number}"
            self._subscriptions.append(
                await self._context.transport.subscribe(
                    [target] if isinstance(target, str) else target,
                    group,
                    self._spans.traced(functools.partial(self._on_event, spec), group),
                    from_beginning=spec.replay,
                    max_in_flight=in_flight,
                )
            )
        if self.agent_cls.schedules:
            self._scheduler = hosting.scheduler(self.agent_cls.schedules, self.agent_id)
            await self._scheduler.astart()

    async def stop(self) -> None:
        """Stop the schedules, leave the groups after in-flight work drained, then
        stop the actors."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            await scheduler.astop()
        for subscription in self._subscriptions:
            await subscription.stop()
        # No more chunks will come here: handlers still reading end now, not
        # after their idle time (the stream's end marker goes to the next owner).
        stopped = JsonRpcError(
            ErrorCode.STREAM_BROKEN, "Stream broken", "the agent stopped before the stream ended"
        )
        self.inbound.fail_all(stopped)
        # Together: each waits for its agent's on_stop, all within one drain timeout.
        await asyncio.gather(*(replica.stop() for replica in self.replicas))
        self._subscriptions.clear()
        self.replicas.clear()
        self._serving.clear()
        self._full.clear()

    def _pressure(self, index: int, full: bool) -> None:
        """Pause the inbox and the subscriptions once every replica's mailbox is
        full; fetch again as soon as one has room."""
        replica = self.replicas[index]
        was_paused = len(self._full) == len(self.replicas)
        if full:
            self._full.add(replica)
        else:
            self._full.discard(replica)
        paused = len(self._full) == len(self.replicas)
        if paused != was_paused:
            for subscription in self._subscriptions:
                subscription.pause() if paused else subscription.resume()

    def _replica(self) -> Replica:
        """The replica to hand the next message to: the one holding the fewest."""
        replicas = self._serving
        if len(replicas) == 1:
            return replicas[0]
        return min(replicas, key=_held)

    # -- requests -------------------------------------------------------------------

    async def _on_inbox(self, delivery: Delivery) -> None:
        event = delivery.event
        message = jsonrpc_of(event.get_data()) or self._context.adaptor.to_jsonrpc(event)
        method = message.get("method")
        if not isinstance(method, str):
            await self._answering.dead_letter(delivery, "not a request: the message has no method")
            return
        spec = self._methods.get(method)
        if spec is None:
            await self._builtin_or_unknown(delivery, message, method)
            return
        # A session id alone is a conversation's; a chunk, end or abort names its part.
        if event.get_attributes().get(_SESSION) is not None and is_stream_part(message):
            if spec.stream_param is None:
                detail = f"{method} takes no stream (it has no Iterator parameter)"
                error = JsonRpcError(ErrorCode.INVALID_PARAMS, "Invalid params", detail)
                await self._answering.answer(delivery, message, Outcome(error=error))
            else:
                await self.inbound.on_chunk(self._replica(), delivery, spec, message)
            return
        try:
            # A methodcaller: the call runs in C in the actor thread (no Python frame).
            # A stream sent as one array gets a fresh iterator per attempt (Binder.call).
            call = spec.binder.caller(spec.attribute, message.get("params"))
        except JsonRpcError as exc:
            await self._answering.answer(delivery, message, Outcome(error=exc))
            return
        job = Job(call, method, event, delivery.redelivered)
        replica = self._replica()
        if "id" in message:
            reply_to = event.get_attributes().get(_TASK_ID) and event.get_extension(ext.REPLY_TO)
            if isinstance(reply_to, str):
                await self._run_task(replica, delivery, message, job, spec.streams_out, reply_to)
                return
            if spec.streams_out:
                await self.outbound.run(replica, delivery, message, job)
                return
            if self._dispatcher.is_local_caller(delivery):
                job.answer = self._answer_local_caller
        outcome = await replica.submit(job)
        if job.answered:
            self._metrics.handled += 1
            if outcome.error is not None and self._spans.enabled:
                span = self._spans.of(delivery)  # answered in-process: the error marks it here
                if span is not None:
                    tracing.record_response(span, {"error": outcome.error.to_dict()})
            return
        await self._answering.answer(delivery, message, outcome)

    async def _run_task(
        self,
        replica: Replica,
        delivery: Delivery,
        message: dict[str, Any],
        job: Job,
        streams: bool,
        reply_to: str,
    ) -> None:
        """A request run as a task (:mod:`a2a_bus.core.task_marks`): marked started,
        cancelable from any node (``stream/cancel`` of its id to this node's reply
        topic: a generator is closed, a plain handler sees ``self.cancelled``), its
        progress sent as marks, then answered as any request."""
        marks = TaskMarks(self._context, delivery, reply_to)
        job.control = marks.control
        await marks.started()
        request_id = delivery.event.get_id()
        try:
            if streams:
                await self.outbound.run(replica, delivery, message, job, before_end=marks.close)
                return
            self._dispatcher.stream_started(request_id, marks.control.cancel)
            try:
                outcome = await replica.submit(job)
            finally:
                self._dispatcher.stream_ended(request_id)
            await marks.close()
            await self._answering.answer(delivery, message, outcome)
        finally:
            await marks.close()

    def _answer_local_caller(self, job: Job, outcome: Outcome) -> bool:
        """Resolve the caller's request at once, on the loop, as the outcome lands."""
        if outcome.crash is not None:
            return False  # dead-lettered first, then answered by Answering.answer
        outcome = carried(outcome)
        error = outcome.error
        response = {"result": outcome.result} if error is None else {"error": error.to_dict()}
        self._dispatcher.answer_local(job.event.get_id(), response)
        return True

    async def _builtin_or_unknown(
        self, delivery: Delivery, message: dict[str, Any], method: str
    ) -> None:
        if method == "agent/card/get":
            await self._answering.answer(delivery, message, Outcome(result=self.card()))
        elif method == "methods/list":
            methods = [{"agent": self.agent_id, **m} for m in self.card()["methods"]]
            await self._answering.answer(delivery, message, Outcome(result={"methods": methods}))
        elif "id" in message:
            error = JsonRpcError(ErrorCode.METHOD_NOT_FOUND, "Method not found", method)
            await self._answering.answer(delivery, message, Outcome(error=error))
        else:
            reason = f"unknown method {method!r} on {self.agent_id}"
            await self._answering.dead_letter(delivery, reason)

    # -- pub/sub --------------------------------------------------------------------

    async def _on_event(self, spec: SubscriptionSpec, delivery: Delivery) -> None:
        event = delivery.event
        job = Job(
            methodcaller(spec.attribute, event),
            label=f"{spec.subject} event {event.get_id()}",
            event=event,
            redelivered=delivery.redelivered,
        )
        outcome = await self._replica().submit(job)
        await self._answering.settle_event(delivery, outcome)


def _held(replica: Replica) -> int:
    return replica.held


__all__ = ["AgentHost"]
