"""Raw JSON-RPC over Kafka: answer what any Kafka client produces on the ingress topic.

A record on ``<prefix>.ingress`` holds raw JSON-RPC (one message or a batch) or a
structured CloudEvent; kcat is enough to send one. Each request is routed through
the bus like any other, and its response is produced as raw JSON-RPC on the topic
named in the record's ``reply-to`` header (default ``<prefix>.ingress.reply``),
keyed by the request id. Notifications produce nothing. A ``reply-to`` naming one
of the bus's own topics is ignored (the default topic is used): a raw answer there
would pose as an agent card, a request, another caller's reply or new ingress input.
``reply_topics`` (or ``A2A_INGRESS_REPLY_TOPICS``), a regular expression, narrows
the allowed ``reply-to`` topics further; others are answered on the default topic.

Bad input gets both an answer and a dead letter: the transport dead-letters a record
it cannot decode (reason and JSON-RPC errors in ``a2a-dlq-*`` headers) and hands
its errors to the ingress (``on_undecodable``), which answers with them before the
record is committed. A request the bus cannot route (unknown method, or an agent
discovery does not know: -32002 "Agent not found") is answered with the error and
dead-lettered here; a notification to an unknown agent, which has nobody to tell,
is dead-lettered with the reason (nothing is written to the agent's topic). An
event ``POST /events`` refuses (``routing.outside_refusal``: one naming its own
``replyto``, or a response, which would answer another caller's pending request)
is dead-lettered as ``forbidden: ...``, and a request among them is answered
-32600 first.

A record's event continues its sender's trace: its own valid ``traceparent``, else
the record's ``traceparent`` (and ``tracestate``) header, else a new one; a raw
answer carries the request's ``traceparent`` as a header.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Sequence
from typing import Any

import orjson
from cloudevents.core.v1.event import CloudEvent
from opentelemetry.trace import Span

from a2a_bus.core.routing import outside_refusal
from a2a_bus.core.service import JsonRpcService
from a2a_bus.gateway.prom import INGRESS_RECORDS
from a2a_bus.protocol import (
    ErrorCode,
    Kind,
    adopt_trace,
    error_response,
    event_kind,
    ext,
)
from a2a_bus.runtime import tracing
from a2a_bus.runtime.env import EnvError
from a2a_bus.transport.base import Consumed, Delivery, Subscription, Undecodable
from a2a_bus.transport.dead_letters import delivered_letter

log = logging.getLogger(__name__)

REPLY_TO_HEADER = "reply-to"
TRACEPARENT, TRACESTATE = ext.TRACEPARENT, ext.TRACESTATE
REPLY_TOPICS_ENV = "A2A_INGRESS_REPLY_TOPICS"
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
#: Errors meaning the bus could not route the request: the record is dead-lettered too.
_UNROUTABLE = {ErrorCode.METHOD_NOT_FOUND, ErrorCode.INVALID_REQUEST}


def reply_topics_pattern(reply_topics: str | None = None) -> re.Pattern[str] | None:
    """The allowed ``reply-to`` topics: ``reply_topics`` if given, else
    ``A2A_INGRESS_REPLY_TOPICS``; None when empty (any topic but the bus's own).

    A pattern that is no regular expression raises ValueError (EnvError from the
    variable) naming where it came from and what is wrong with it.
    """
    if reply_topics is not None:
        name, pattern = "reply_topics", reply_topics
    else:
        name, pattern = REPLY_TOPICS_ENV, os.environ.get(REPLY_TOPICS_ENV, "")
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        error = ValueError if reply_topics is not None else EnvError
        raise error(f"{name}={pattern!r}: not a regular expression: {exc}") from None


def header(headers: Sequence[tuple[str, bytes]], name: str) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            with contextlib.suppress(UnicodeDecodeError):
                return value.decode()
    return None


class Ingress:
    """Consumes the ingress topic of a bus and answers on reply topics.

    ``async with Ingress(bus.service):`` on a started bus: requests go through
    the bus's JSON-RPC service, as every front door's do. Replicas in several
    processes share the ingress partitions (one consumer group, ``<prefix>.ingress``).
    """

    def __init__(
        self,
        service: JsonRpcService,
        *,
        timeout: float | None = None,
        max_in_flight: int = 256,
        reply_topics: str | None = None,
    ):
        self._service = service
        self._bus = bus = service.dispatcher.context
        #: Which ``reply-to`` topics may be answered on (a regular expression the
        #: whole name must match); None: any but the bus's own. From
        #: ``A2A_INGRESS_REPLY_TOPICS`` unless given, so producers cannot make the
        #: bus create topics of any name.
        self.reply_topics = reply_topics_pattern(reply_topics)
        #: The bus's topic names (the ingress topic, its default reply topic, the DLQ).
        self.topics = bus.topics
        self.topic = bus.topics.ingress
        self.reply_topic = bus.topics.ingress_reply
        self.group = self.topic
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self._subscription: Subscription | None = None

    async def start(self) -> None:
        transport = self._bus.transport
        self._subscription = await transport.subscribe(
            [self.topic],
            self.group,
            self._on_delivery,
            max_in_flight=self.max_in_flight,
            on_undecodable=self._on_undecodable,
        )

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.stop()
        self._subscription = None

    async def __aenter__(self) -> Ingress:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- answering ----------------------------------------------------------------

    def _reply_topic(self, headers: Sequence[tuple[str, bytes]]) -> str:
        wanted = header(headers, REPLY_TO_HEADER)
        if wanted is None:
            return self.reply_topic
        if not _TOPIC.match(wanted) or wanted in (".", ".."):
            log.warning("ignored an invalid reply-to topic %r", wanted)
            return self.reply_topic
        if self._internal(wanted):
            log.warning("ignored a reply-to naming one of the bus's own topics: %r", wanted)
            return self.reply_topic
        if self.reply_topics is not None and not self.reply_topics.fullmatch(wanted):
            log.warning("ignored a reply-to outside the allowed reply topics: %r", wanted)
            return self.reply_topic
        return wanted

    def _internal(self, topic: str) -> bool:
        """True for the bus's own topics and Kafka's internal ones."""
        topics = self._bus.topics
        own = (topics.registry, topics.ingress, topics.dlq, topics.tasks)
        if topic in own or topic.startswith("__"):
            return True
        families = ("agent", "topic", "reply")
        return any(topic.startswith(f"{topics.prefix}.{family}.") for family in families)

    async def _reply(
        self,
        topic: str,
        response: dict[str, Any],
        answering: Consumed,
        event: CloudEvent | None = None,
    ) -> None:
        """Write a raw response to the record ``answering`` (in its transaction in
        exactly_once mode), with the trace of the request it answers (``event``'s)
        as a ``traceparent`` header."""
        id = response.get("id")
        key = None if id is None else str(id).encode()
        headers = []
        traceparent = event.get_attributes().get(TRACEPARENT) if event is not None else None
        if isinstance(traceparent, str):
            headers.append((TRACEPARENT, traceparent.encode()))
        await self._bus.transport.publish_raw(
            topic, orjson.dumps(response), key=key, headers=headers, answering=answering
        )

    async def _on_delivery(self, delivery: Delivery) -> None:
        """Answer one record's event in its sender's trace (see the module docstring)."""
        event = delivery.event
        attributes = event.get_attributes()
        headers = delivery.headers
        adopt_trace(attributes, header(headers, TRACEPARENT), header(headers, TRACESTATE))
        tracer = self._bus.tracing.tracer
        if tracer is None:
            await self._answer(delivery, None)
            return
        # A CONSUMER span named after the topic, not the method: the record is the
        # outside's, and a span name per method it names would be its to mint.
        span = tracing.start_process(
            tracer,
            attributes,
            delivery.topic,
            self.group,
            self._bus.messaging_system,
            request=False,
            redelivered=delivery.redelivered,
        )
        tracing.stamp(attributes, span)  # what the bus sends for it continues the span
        with tracing.ending(span):  # not current: the handler runs step by step
            await self._answer(delivery, span)

    async def _answer(self, delivery: Delivery, span: Span | None) -> None:
        event = delivery.event
        request = event_kind(event) is Kind.REQUEST
        data = event.get_data()
        id = data.get("id") if isinstance(data, dict) and delivery.raw else event.get_id()
        refused = outside_refusal(event)
        if refused is not None:  # the rule POST /events applies (a 400 there)
            INGRESS_RECORDS.labels("forbidden").inc()
            if request:
                refusal = error_response(ErrorCode.INVALID_REQUEST, "Invalid Request", id, refused)
                await self._reply(self._reply_topic(delivery.headers), refusal, delivery, event)
            await self._dead_letter(delivery, f"forbidden: {refused}", span)
            return
        response, error = await self._service.answer(event, timeout=self.timeout)
        if response is None and error is not None:  # not sent: nobody else to tell
            why = "too-large" if error.code == ErrorCode.TOO_LARGE else "unroutable"
            INGRESS_RECORDS.labels(why).inc()
            await self._dead_letter(delivery, f"{why}: {error.message}: {error.data}", span)
            return
        if response is None or not request:
            INGRESS_RECORDS.labels("notification").inc()
            return
        await self._reply(self._reply_topic(delivery.headers), response, delivery, event)
        if span is not None:
            tracing.record_response(span, response, method_named=False)
        error = response.get("error")
        if isinstance(error, dict) and self._unroutable(event, error):
            INGRESS_RECORDS.labels("unroutable").inc()
            detail = f": {error['data']}" if error.get("data") is not None else ""
            await self._dead_letter(delivery, f"unroutable: {error.get('message')}{detail}", span)
        else:
            INGRESS_RECORDS.labels("answered").inc()

    @staticmethod
    def _unroutable(event: CloudEvent, error: dict[str, Any]) -> bool:
        # -32002 also answers agent/card/get for an unknown agent, and pending requests
        # at shutdown: only the refusal names the request's own target.
        if error.get("code") == ErrorCode.AGENT_UNAVAILABLE:
            target = event.get_extension(ext.TARGET_AGENT)
            return target is not None and error.get("data") == target
        return error.get("code") in _UNROUTABLE

    async def _dead_letter(self, delivery: Delivery, reason: str, span: Span | None) -> None:
        await self._bus.transport.dead_letter(delivered_letter(delivery, reason))
        if span is not None:
            tracing.record_dead_letter(span, reason, 1)
        self._bus.metrics.dead_letters += 1

    async def _on_undecodable(self, record: Undecodable) -> None:
        """Answer a record that is not JSON-RPC (nor a CloudEvent) with its errors;
        the transport dead-lettered it already."""
        INGRESS_RECORDS.labels("invalid").inc()
        topic = self._reply_topic(record.headers)
        for failure in record.failures:
            await self._reply(topic, failure.response(), record)
