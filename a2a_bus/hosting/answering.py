"""How an agent host answers what it consumed: responses and dead letters.

A request's outcome becomes its JSON-RPC response on the caller's reply topic (or,
for a caller in this process on the in-process transport, straight to the
dispatcher); a message nobody can answer, a handler that crashed and a failed
notification go to the dead-letter topic with the reason and where they came from.
Answers and dead letters continue the trace of the message they answer.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from a2a_bus.core.context import BusContext
from a2a_bus.core.dispatch import Dispatcher
from a2a_bus.hosting.actor import Outcome
from a2a_bus.hosting.delivery_spans import DeliverySpans
from a2a_bus.hosting.outbound import carried
from a2a_bus.protocol import (
    ErrorCode,
    JsonRpcError,
    error_response,
    ext,
    record_key,
    result_response,
)
from a2a_bus.runtime import tracing
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.dead_letters import delivered_letter
from a2a_bus.transport.errors import RecordTooLarge

log = logging.getLogger(__name__)

AGENT_HEADER = "a2a-dlq-agent"
ATTEMPTS_HEADER = "a2a-dlq-attempts"


class Answering:
    """Answers and dead letters of one agent's host."""

    def __init__(
        self,
        context: BusContext,
        dispatcher: Dispatcher,
        agent_id: str,
        spans: DeliverySpans,
    ) -> None:
        self._context = context
        self._dispatcher = dispatcher
        self._agent_id = agent_id
        self._spans = spans

    async def answer(self, delivery: Delivery, message: dict[str, Any], outcome: Outcome) -> None:
        """Count the outcome, dead-letter a dead message (or a notification that
        failed: nobody else hears of it), and reply to a request."""
        self._context.metrics.handled += 1
        id = message.get("id")
        if "id" in message:
            outcome = carried(outcome)
        if outcome.crash is not None:
            await self.dead_letter(delivery, f"handler-crash: {outcome.crash}", outcome.attempts)
            error = outcome.error  # set when the agent did not run it (it could not start)
            if error is None:
                # The traceback is in the log; the caller learns only that it failed.
                response = error_response(ErrorCode.INTERNAL_ERROR, "Internal error", id)
            else:
                response = error_response(error.code, error.message, id, error.data)
        elif outcome.error is not None:
            error = outcome.error
            if "id" not in message:
                await self.dead_letter(delivery, handler_error(error), outcome.attempts)
                return
            response = error_response(error.code, error.message, id, error.data)
        else:
            response = result_response(outcome.result, id)
        if "id" in message:
            span = self._spans.of(delivery)
            if span is not None:
                tracing.record_response(span, response)
            await self.respond(delivery, response)

    async def settle_event(self, delivery: Delivery, outcome: Outcome) -> None:
        """Count a subscribed event's outcome; dead-letter it if its handler failed."""
        self._context.metrics.handled += 1
        if outcome.crash is not None:
            await self.dead_letter(delivery, f"handler-crash: {outcome.crash}", outcome.attempts)
        elif outcome.error is not None:
            await self.dead_letter(delivery, handler_error(outcome.error), outcome.attempts)

    async def respond(self, delivery: Delivery, response: dict[str, Any]) -> None:
        """Send ``response`` to the caller's reply topic (raw if the request was raw).

        A response the transport refuses as too large (Kafka, for a request made
        outside the bus whose id or method fills the record) is replaced by -32005
        once, so the caller hears why instead of waiting for its timeout.
        """
        try:
            await self._respond(delivery, response)
        except RecordTooLarge as exc:
            log.warning("a response was not sent: %s", exc)
            error = (ErrorCode.TOO_LARGE, "Response too large", response.get("id"), str(exc))
            await self._respond(delivery, error_response(*error))

    async def _respond(self, delivery: Delivery, response: dict[str, Any]) -> None:
        event = delivery.event
        if self._dispatcher.is_local_caller(delivery):
            self._dispatcher.answer_local(event.get_id(), response)
            return
        context = self._context
        reply_to = event.get_extension(ext.REPLY_TO)
        transport = context.transport
        if delivery.raw:
            topic = reply_to if isinstance(reply_to, str) else context.topics.ingress_reply
            value, key = orjson.dumps(response), event.get_id().encode()
            await transport.publish_raw(topic, value, key=key, answering=delivery)
            return
        if not isinstance(reply_to, str):
            log.debug("request %s has no reply topic; its response is dropped", event.get_id())
            return
        answer = context.adaptor.response_event(event, response, source=context.source)
        answer.get_attributes()[ext.REPLY_TO] = reply_to
        await transport.publish(reply_to, answer, key=record_key(answer), answering=delivery)

    async def dead_letter(self, delivery: Delivery, reason: str, attempts: int = 1) -> None:
        """Write the delivered event to the dead-letter topic with why and where from."""
        agent_id = self._agent_id
        mark = [(AGENT_HEADER, agent_id.encode()), (ATTEMPTS_HEADER, str(attempts).encode())]
        context = self._context
        await context.transport.dead_letter(delivered_letter(delivery, reason, mark))
        context.metrics.dead_letters += 1
        span = self._spans.of(delivery)
        if span is not None:
            tracing.record_dead_letter(span, reason, attempts)
        log.warning("dead letter from %s: %s", agent_id, reason)


def handler_error(error: JsonRpcError) -> str:
    """The dead-letter reason for a message whose handling ended in ``error``."""
    # A header of the dead letter: its detail is kept short.
    detail = f": {error.data[:500]}" if isinstance(error.data, str) else ""
    return f"handler-error: {error.code} {error.message}{detail}"


__all__ = ["AGENT_HEADER", "ATTEMPTS_HEADER", "Answering", "handler_error"]
