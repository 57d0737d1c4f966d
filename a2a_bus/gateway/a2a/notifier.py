"""Push notifications of the bus's tasks: each status change POSTed to the task's
webhooks once per change, not once per gateway replica.

The gateways share one consumer group over the task log (``<prefix>.tasks.notify``):
each record is handled by the replica that owns its partition, which waits until
its view has folded that record, POSTs the status changes the record made (the
task as it was then; the delivery id derived from the task, the change's number
and the config, the same on every replica and attempt) and only then lets the
record be committed. So a replica that dies mid-delivery leaves the record to
the next owner: delivered at least once, repeats told apart by the delivery id.
It is also what lets the view save a task to its store (:meth:`TaskView.handled`):
as of the record just delivered, never past one still being delivered.
"""

from __future__ import annotations

import asyncio
import logging

from a2a_bus.core.routing import Topics
from a2a_bus.gateway.a2a.push import PushConfig
from a2a_bus.gateway.a2a.updates import StatusChanged
from a2a_bus.gateway.a2a.view import TaskView
from a2a_bus.gateway.a2a.webhooks import Outcome, WebhookSender
from a2a_bus.transport.base import Delivery, Subscription, Transport

log = logging.getLogger(__name__)


class Notifier:
    """Delivers the status changes of the tasks whose log partitions this replica owns."""

    def __init__(
        self, transport: Transport, topics: Topics, view: TaskView, sender: WebhookSender
    ) -> None:
        self._transport = transport
        self._topic = topics.tasks
        self._group = f"{topics.prefix}.tasks.notify"
        self._view = view
        self._sender = sender
        self._subscription: Subscription | None = None

    async def start(self) -> None:
        await self._sender.start()
        self._subscription = await self._transport.subscribe(
            [self._topic], self._group, self._on_record, dead_letter=False, max_in_flight=256
        )

    async def stop(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            await subscription.stop()
        await self._sender.stop()

    async def _on_record(self, delivery: Delivery) -> None:
        partition, offset = delivery.partition, delivery.offset
        made = await self._view.made_by(partition, offset)
        if made is None:
            return
        task_id, updates = made
        fold = self._view.get(task_id)
        if fold is not None and fold.push:
            configs = [PushConfig.from_dict(config) for config in fold.push.values()]
            deliveries: list[asyncio.Future[Outcome]] = []
            for versioned in updates:
                update = versioned.update
                if isinstance(update, StatusChanged):
                    deliveries += self._sender.notify(update.snapshot, versioned.version, configs)
            if deliveries:
                await asyncio.wait(deliveries)
        # Delivered: the task may be saved as of this record; then it is committed.
        self._view.handled(task_id, partition, offset)
