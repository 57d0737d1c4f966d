"""The host's side of a request run as a task (see :mod:`a2a_bus.core.task_marks`).

:class:`TaskMarks` sends the marks of one such request, in order, on its reply
topic: ``started`` before the handler runs, then one ``progress`` mark per
``self.progress(...)`` of the handler (called in the actor's thread, sent from
the loop by one pump, so that the marks keep their order and none overtakes the
answer: the host closes the pump before it answers).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from a2a_bus.core.context import BusContext
from a2a_bus.core.task_marks import PROGRESS, STARTED, mark_event
from a2a_bus.hosting.actor import thread_safe
from a2a_bus.hosting.control import RunControl
from a2a_bus.protocol import record_key
from a2a_bus.transport.base import Delivery

log = logging.getLogger(__name__)

#: Ends the pump.
_END = object()


class TaskMarks:
    """The marks of one request run as a task, and its handler's :class:`RunControl`."""

    def __init__(self, context: BusContext, delivery: Delivery, reply_to: str) -> None:
        self._context = context
        self._delivery = delivery
        self._reply_to = reply_to
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._pump: asyncio.Task[None] | None = None
        loop = asyncio.get_running_loop()
        self.control = RunControl(thread_safe(loop, self._queue.put_nowait))

    async def started(self) -> None:
        """Say the handler starts here (where to cancel it; whether a redelivery),
        then send its progress marks as they come."""
        context, delivery = self._context, self._delivery
        event = mark_event(
            context.adaptor,
            delivery.event,
            STARTED,
            source=context.source,
            control=context.reply_topic,
            redelivered=delivery.redelivered,
        )
        await context.transport.publish(self._reply_to, event, key=record_key(event))
        self._pump = asyncio.get_running_loop().create_task(self._send_progress())

    async def close(self) -> None:
        """Send the progress marks still queued; none is sent after this."""
        if self._pump is None:
            return
        self._queue.put_nowait(_END)
        await self._pump

    async def _send_progress(self) -> None:
        context, request = self._context, self._delivery.event
        transport = context.transport
        while (note := await self._queue.get()) is not _END:
            event = mark_event(context.adaptor, request, PROGRESS, note, source=context.source)
            try:
                await transport.publish(self._reply_to, event, key=record_key(event))
            except Exception as exc:  # a note too large, the broker gone: the work goes on
                log.warning("a progress mark of task %s was not sent: %s", request.get_id(), exc)
