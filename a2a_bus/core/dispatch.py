"""The caller side of one bus: route, send, open streams, correlate the answers.

Every message a process sends goes through its :class:`Dispatcher` (on the bus
loop): it decides the route (once: a caller that planned the route passes it
in), writes the event, and for a request waits for the answer that the reply
topic (or, in-process, the agent host itself) brings back to the
:class:`~a2a_bus.core.correlation.Correlator`. It also runs this node's side of
stream cancels: the generators running here, stopped by ``stream/cancel``.

Every event it writes carries a ``traceparent``: the one it was given (the trace
it continues), else a new trace's; with an OpenTelemetry SDK, that of the span
of its sending. A message deeper in a chain of agent calls than
``BusContext.max_call_depth`` is refused where it is routed (-32008).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.core.context import BusContext
from a2a_bus.core.correlation import Correlator
from a2a_bus.core.errors import transport_refusal
from a2a_bus.core.reply_stream import ReplyStream
from a2a_bus.core.routing import Route, RouteKind, RoutingError, decide
from a2a_bus.core.stream_request import send_stream_request, unsent
from a2a_bus.core.streams import CANCEL_METHOD, cancel_message
from a2a_bus.discovery.directory import BUILTIN_METHODS, Directory
from a2a_bus.protocol import (
    ErrorCode,
    Failure,
    Kind,
    classify,
    depth_refusal,
    error_response,
    ext,
    jsonrpc_of,
    kind_of,
    new_event,
    new_id,
    new_traceparent,
    result_response,
)
from a2a_bus.runtime import tracing
from a2a_bus.runtime.portal import BusStopped
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.errors import TransportError

log = logging.getLogger(__name__)

_METHOD, _REPLY_TO, _TARGET_AGENT = ext.METHOD, ext.REPLY_TO, ext.TARGET_AGENT
_TRACEPARENT, _CALLDEPTH, _CALLCHAIN = ext.TRACEPARENT, ext.CALLDEPTH, ext.CALLCHAIN
# A member read off its enum class goes through the metaclass's __getattr__ hook
# (about 0.1 us on Python 3.11): the paths every message takes use these.
_REQUEST, _P2P, _PUBSUB = Kind.REQUEST, RouteKind.P2P, RouteKind.PUBSUB


class Dispatcher:
    """Sends this node's messages and brings their answers back to the callers."""

    def __init__(
        self, context: BusContext, directory: Directory, *, require_known_agents: bool
    ) -> None:
        self.context = context
        self.directory = directory
        #: Refuse messages to agents discovery does not know (``Directory.known``).
        self.require_known_agents = require_known_agents
        self.correlator = Correlator(context.metrics, stop_upstream=self.cancel)
        #: ``answer_local(request_id, response)``: resolve a request of this process's
        #: caller at once (on the loop), for answers that skip the reply topic
        #: (:meth:`is_local_caller`). The correlator's own method: no call in between.
        self.answer_local: Callable[[str, dict[str, Any]], None] = self.correlator.answer
        # Parts of the context read on every request, kept at hand.
        self._metrics = context.metrics
        self._transport = context.transport
        self._topics = context.topics
        self._local_replies = context.local_replies
        self._reply_topic = context.reply_topic
        self._method_owner = directory.method_owner
        self._max_call_depth = context.max_call_depth
        self._tracing = context.tracing
        self._system = context.messaging_system
        self._running = False
        #: Agent -> caller streams whose generator runs here: request id -> stop it.
        self._streams: dict[str, Callable[[], None]] = {}
        self._background: set[asyncio.Task[None]] = set()

    # -- lifecycle ------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._running

    def open(self) -> None:
        """Accept messages from now on (the transport runs)."""
        self._running = True

    def drain(self) -> None:
        """A stream reader that is behind no longer holds the reply topic."""
        self.correlator.drain()

    async def close(self) -> None:
        """Refuse new messages; callers still waiting are answered -32002."""
        await asyncio.gather(*self._background, return_exceptions=True)
        self._running = False
        self.correlator.close()

    def _check_running(self) -> None:
        if not self._running:
            raise BusStopped("the bus is not running")

    # -- routing --------------------------------------------------------------------

    def route(self, event: CloudEvent, kind: Kind | None = None) -> Route:
        """Where ``event`` goes (:func:`~a2a_bus.core.routing.decide`; ``kind``: its
        :func:`~a2a_bus.protocol.event_kind` if known); RoutingError -32002 "Agent not
        found" (id in ``data``) for an agent discovery does not know, -32008 "Call chain
        too deep" past the call depth limit (the chain in ``data``)."""
        attributes = event.get_attributes()
        depth = attributes.get(_CALLDEPTH)
        if depth is not None:
            error = depth_refusal(depth, self._max_call_depth, attributes.get(_CALLCHAIN))
            if error is not None:
                raise RoutingError(error.code, error.message, error.data)
        route = decide(event, self._topics, self._method_owner, kind)
        if (
            route.kind is _P2P
            and self.require_known_agents
            and not self.directory.known(route.agent_id or "")
        ):
            raise RoutingError(ErrorCode.AGENT_UNAVAILABLE, "Agent not found", route.agent_id)
        return route

    def route_notification(self, event: CloudEvent, method: Any) -> Route:
        """The route of a notification, refused (-32601) when the agent it names is
        known to lack its method: a request is answered -32601 by the agent, a
        notification would only be dead-lettered there, out of its sender's sight."""
        route = self.route(event)
        if (
            route.kind is RouteKind.P2P
            and isinstance(method, str)
            and self.directory.lacks(route.agent_id or "", method)
        ):
            raise RoutingError(ErrorCode.METHOD_NOT_FOUND, "Method not found", method)
        return route

    # -- sending --------------------------------------------------------------------

    async def send(
        self,
        event: CloudEvent,
        *,
        route: Route | None = None,
        timeout: float | None = None,
        fresh: bool = False,
    ) -> dict[str, Any] | None:
        """Route ``event`` (unless ``route`` is given); for a request wait for its
        response, with the caller's id restored.

        An event without ``a2amethod`` whose type is ``<prefix>.<method>.req`` (or
        ``.stream``, or a notification's ``<prefix>.<method>``) calls that method.
        ``fresh``: the event was made for this call alone, so it is sent as is
        (given its bus-wide id and reply topic) rather than copied.
        """
        if not self._running:  # (_check_running, spelled out: this runs for every request)
            raise BusStopped("the bus is not running")
        # The attributes dict is read directly: this runs for every request.
        attributes = event.get_attributes()
        if _METHOD not in attributes:
            # A native event calls the method its type names (PROTOCOL.md section 3);
            # events made from JSON-RPC always carry a2amethod, so they skip this.
            event = self.context.adaptor.with_method(event)
            attributes = event.get_attributes()
        kind = kind_of(attributes)
        is_request = kind is _REQUEST
        data = event.get_data()
        message = jsonrpc_of(data)
        caller_id = message.get("id") if message is not None else attributes["id"]
        method = attributes.get(_METHOD)
        if route is None:
            if method in BUILTIN_METHODS and is_builtin(event):
                params = message.get("params") if message is not None else data
                return self.directory.answer(str(method), params, caller_id) if is_request else None
            try:
                if is_request:
                    route = self.route(event, kind)
                else:
                    route = self.route_notification(event, method)
            except RoutingError as exc:
                error = exc.json_rpc_error()
                if is_request:
                    self._metrics.errors += 1
                    return error_response(error.code, error.message, caller_id, error.data)
                # Nothing is written (no topic made for a typo); the sender is told, as
                # for a request (a gateway or the ingress counts or dead-letters it).
                raise error from None
        transport = self._transport
        if not is_request or route.kind is _PUBSUB:
            await self.publish(event, route)
            if is_request:
                return result_response(
                    {"published": event.get_id(), "topic": route.topic}, caller_id
                )
            return None
        request_id, outgoing = self._request_event(event, route.agent_id, fresh)
        tracer = self._tracing.tracer
        span = None
        if tracer is not None:
            attributes = outgoing.get_attributes()
            span = tracing.start_send(
                tracer, attributes, route.topic, self._system, request=True, caller_id=caller_id
            )
        correlator = self.correlator
        if timeout is None:
            timeout = self.context.request_timeout
        future = correlator.expect(request_id, timeout)
        self._metrics.requests += 1
        try:
            sent = transport.publish(route.topic, outgoing, key=route.key)
            if isinstance(sent, asyncio.Future):
                # Not awaited: the answer, the deadline or a failed write ends the
                # wait, whichever comes first (a write may wait while the broker is away).
                sent.add_done_callback(partial(correlator.unsent, request_id))
            else:
                await sent
            response = await future
        except BaseException as exc:
            raise unsent(correlator, request_id, span, exc) from None
        if span is not None:
            tracing.record_response(span, response)
            span.end()
        return {"jsonrpc": "2.0", **response, "id": caller_id}

    async def publish(self, event: CloudEvent, route: Route) -> None:
        """Put ``event`` on the bus as sent (in its trace, else a new one), on a
        route decided before; no answer is waited for."""
        self._check_running()
        attributes = event.get_attributes()
        tracer = self._tracing.tracer
        try:
            if tracer is None:
                if _TRACEPARENT not in attributes:
                    attributes[_TRACEPARENT] = new_traceparent()
                await self._transport.publish(route.topic, event, key=route.key)
                return
            span = tracing.start_send(tracer, attributes, route.topic, self._system, request=False)
            # Ended, not made current: a coroutine may resume in another context here.
            with tracing.ending(span):
                await self._transport.publish(route.topic, event, key=route.key)
        except TransportError as exc:
            raise transport_refusal(exc) from None

    async def send_to(self, event: CloudEvent, route: Route, reply_to: str) -> None:
        """Send the request ``event`` on ``route`` with its answers going to
        ``reply_to`` (a task log) rather than to a caller here: nothing waits for
        them. The event is sent as given (its id is the request's)."""
        attributes = event.get_attributes()
        attributes[_REPLY_TO] = reply_to
        if route.agent_id is not None:
            attributes[_TARGET_AGENT] = route.agent_id
        await self.publish(event, route)
        self._metrics.requests += 1

    async def open_stream(
        self, event: CloudEvent, *, route: Route | None = None, timeout: float | None = None
    ) -> ReplyStream:
        """Send a request whose handler streams; chunks arrive on the returned stream
        (:func:`~a2a_bus.core.stream_request.send_stream_request`)."""
        self._check_running()
        if route is None:
            try:
                route = self.route(event)
            except RoutingError as exc:
                stream = ReplyStream()
                stream.fail(exc.json_rpc_error())
                return stream
        request_id, outgoing = self._request_event(event, route.agent_id)
        return await send_stream_request(
            self.context, self.correlator, request_id, outgoing, route, timeout
        )

    def forget(self, request_id: str) -> None:
        """The caller gave up on ``request_id`` (a stream it stopped reading)."""
        self.correlator.cancel(request_id)

    def _request_event(
        self, event: CloudEvent, agent_id: str | None, fresh: bool = False
    ) -> tuple[str, CloudEvent]:
        """``event`` (a copy unless ``fresh``) with an id unique in the bus, this
        node's reply topic, and a trace (a new one unless it continues one)."""
        attributes = event.get_attributes() if fresh else dict(event.get_attributes())
        request_id = attributes["id"] = new_id()
        attributes[_REPLY_TO] = self._reply_topic
        if _TRACEPARENT not in attributes:
            attributes[_TRACEPARENT] = new_traceparent()
        if agent_id is not None:
            attributes[_TARGET_AGENT] = agent_id
        return request_id, event if fresh else new_event(attributes, event.get_data())

    # -- answers for this node's callers ----------------------------------------------

    def is_local_caller(self, delivery: Delivery) -> bool:
        """The caller is in this process and the transport lets answers skip the
        reply topic (:meth:`answer_local`)."""
        return (
            self._local_replies
            and not delivery.raw
            and delivery.event.get_attributes().get(_REPLY_TO) == self._reply_topic
        )

    async def on_reply(self, delivery: Delivery) -> None:
        """Handle a record of this node's reply topic: an answer, or a cancel for a
        stream whose generator runs here."""
        event = delivery.event
        if event.get_extension(ext.METHOD) != CANCEL_METHOD:
            await self.correlator.on_reply(delivery)
            return
        data = event.get_data()
        params = data.get("params") if isinstance(data, dict) else None
        request_id = params.get("requestId") if isinstance(params, dict) else None
        stop = self._streams.get(request_id) if isinstance(request_id, str) else None
        if stop is not None:
            stop()
        else:  # it ended before the cancel came
            log.debug("stream/cancel for %r: no such stream running here", request_id)

    # -- streams whose generator runs here ----------------------------------------------

    def stream_started(self, request_id: str, stop: Callable[[], None]) -> None:
        """A generator answering ``request_id`` runs here; ``stop`` cancels it."""
        self._streams[request_id] = stop

    def stream_ended(self, request_id: str) -> None:
        self._streams.pop(request_id, None)

    @property
    def running_streams(self) -> int:
        """Generators streaming to callers from this node now."""
        return len(self._streams)

    def cancel(self, request_id: str, control: str) -> None:
        """Tell the node whose reply topic is ``control`` to stop the handler
        answering ``request_id`` (from the loop): a generator is closed, a task's
        plain handler sees ``self.cancelled``."""
        context = self.context
        if control == context.reply_topic:
            # Running here: stop it now rather than behind the chunks queued on
            # this node's reply topic.
            stop = self._streams.get(request_id)
            if stop is not None:
                stop()
            return
        if not self._running or not control.startswith(f"{context.topics.prefix}.reply."):
            return  # only a node's reply topic takes cancels
        message = cancel_message(request_id)
        kind = classify(message)
        event = (
            None if isinstance(kind, Failure) else context.adaptor.event_from_message(message, kind)
        )
        if not isinstance(event, CloudEvent):
            return
        event.get_attributes()[_TRACEPARENT] = new_traceparent()
        task = asyncio.get_running_loop().create_task(self._publish_cancel(control, event))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _publish_cancel(self, control: str, event: CloudEvent) -> None:
        try:
            await self.context.transport.publish(control, event)
        except Exception as exc:  # the generator then runs to its end, unread
            log.warning("could not send stream/cancel to %s: %s", control, exc)


def is_builtin(event: CloudEvent) -> bool:
    """True for ``methods/list`` / ``agent/card/get`` sent to no agent nor subject:
    the bus answers them itself, from its directory."""
    attributes = event.get_attributes()
    return (
        attributes.get(ext.METHOD) in BUILTIN_METHODS
        and attributes.get(ext.TARGET_AGENT) is None
        and attributes.get("subject") is None
    )
