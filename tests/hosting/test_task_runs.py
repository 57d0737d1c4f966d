"""A request run as a task (extension ``taskid``): its host marks the start (where a
cancel goes), sends each progress note as a mark, then the answer, all on the
request's reply topic and keyed by the task id, in order; a cancel sent to the
node running it reaches a plain handler (``self.cancelled``). Both transports
(Kafka: the real broker)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus import Agent, Bus, method
from a2a_bus.core.streams import STREAM_CONTROL
from a2a_bus.core.task_marks import PROGRESS, STARTED, task_mark
from a2a_bus.protocol import ext, new_event
from a2a_bus.transport.base import Delivery
from tests.buses import WAIT, make_bus

__all__ = ["make_bus"]

MakeBus = Callable[..., Awaitable[Bus]]
STOPPED = threading.Event()


class Worker(Agent):
    agent_id = "worker"

    @method
    def steps(self, n: int) -> str:
        for i in range(n):
            self.progress(f"step {i}")
        return "done"

    @method
    def chunks(self, n: int) -> Iterator[int]:
        yield from range(n)

    @method
    def wait(self) -> str:
        deadline = time.monotonic() + WAIT
        while not self.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.cancelled:
            STOPPED.set()
        return "stopped" if self.cancelled else "never canceled"


async def run_task(
    bus: Bus, method_name: str, params: dict[str, Any]
) -> tuple[str, str, list[CloudEvent]]:
    """Send a task request whose answers go to a topic of the test's; its records."""
    task_id = uuid.uuid4().hex
    log = f"{bus.topics.prefix}.log.{task_id[:8]}"
    seen: list[CloudEvent] = []

    async def record(delivery: Delivery) -> None:
        seen.append(delivery.event)

    await bus.transport.subscribe([log], f"reader-{task_id[:8]}", record, from_beginning=True)
    message = {"jsonrpc": "2.0", "method": method_name, "params": params, "id": task_id}
    attributes = {
        "source": "test",
        "type": f"org.apache.eventmesh.a2a.{method_name}.req",
        "datacontenttype": "application/json",
        ext.METHOD: method_name,
        ext.MCPTYPE: "request",
        ext.TARGET_AGENT: "worker",
        ext.TASK_ID: task_id,
        ext.PARTITION_KEY: task_id,
        "id": task_id,
    }
    event = new_event(attributes, message)
    dispatcher = bus.service.dispatcher
    await dispatcher.send_to(event, dispatcher.route(event), log)
    return task_id, log, seen


async def answered(seen: list[CloudEvent], done: Callable[[CloudEvent], bool]) -> None:
    async def poll() -> None:
        while not any(done(e) for e in seen):
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), WAIT)


def is_answer(event: CloudEvent) -> bool:
    return task_mark(event) is None and event.get_attributes().get(ext.SEQ) is None


async def test_marks_then_the_answer_keyed_by_the_task(make_bus: MakeBus) -> None:
    bus = await make_bus(Worker)
    task_id, _, seen = await run_task(bus, "steps", {"n": 3})
    await answered(seen, is_answer)
    marks = [(task_mark(e), e.get_data()["result"]) for e in seen]
    assert marks == [
        (STARTED, None),
        (PROGRESS, "step 0"),
        (PROGRESS, "step 1"),
        (PROGRESS, "step 2"),
        (None, "done"),
    ]
    for event in seen:
        attributes = event.get_attributes()
        assert attributes[ext.TASK_ID] == attributes[ext.PARTITION_KEY] == task_id
        assert attributes[ext.COLLABORATION] == task_id
    assert seen[0].get_attributes()[STREAM_CONTROL] == bus.context.reply_topic


async def test_a_streaming_task_is_marked_started_before_its_chunks(make_bus: MakeBus) -> None:
    bus = await make_bus(Worker)
    _, _, seen = await run_task(bus, "chunks", {"n": 3})
    await answered(seen, lambda e: e.get_attributes().get("streamend") in (True, "true"))
    assert task_mark(seen[0]) == STARTED
    assert [e.get_data()["result"] for e in seen[1:4]] == [0, 1, 2]


async def test_a_cancel_reaches_a_plain_handler(make_bus: MakeBus) -> None:
    STOPPED.clear()
    bus = await make_bus(Worker)
    task_id, _, seen = await run_task(bus, "wait", {})
    await answered(seen, lambda e: task_mark(e) == STARTED)
    control = seen[0].get_attributes()[STREAM_CONTROL]
    bus.service.dispatcher.cancel(task_id, control)
    await answered(seen, is_answer)
    assert [e.get_data()["result"] for e in seen if is_answer(e)] == ["stopped"]
    assert STOPPED.is_set()
