"""``GET /topics/{subject}/events``: a live Server-Sent Events view of a pub/sub subject.

Each event is ``event: cloudevent`` with the structured CloudEvent as data. The
view starts at the moment of the request (a fresh consumer group), holds at most
``QUEUE`` undelivered events (older ones are dropped and counted in a comment
line) and sends a keep-alive comment every ``KEEPALIVE`` seconds, so a client that
went away is noticed and its subscription stopped even on a quiet subject.

A view creates no topic: one of a subject never published on waits for its topic
to appear, and shows its events from the first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import orjson
from cloudevents.core.v1.event import CloudEvent
from starlette.requests import Request
from starlette.responses import Response

from a2a_bus.core.routing import RoutingError
from a2a_bus.core.watch import watch
from a2a_bus.gateway.context import context, require_access, topic_refusal
from a2a_bus.gateway.responses import problem
from a2a_bus.gateway.sse import SSEResponse
from a2a_bus.protocol import to_structured
from a2a_bus.transport.base import Delivery

QUEUE = 1024
KEEPALIVE = 15.0


async def tail(request: Request) -> Response:
    ctx = context(request)
    access = require_access(request)
    subject = request.path_params["subject"]
    refused = topic_refusal(access, subject)
    if refused is not None:
        return refused
    if request.method == "HEAD":
        # Headers only, and no subscription: no body would ever tell that its client left.
        try:
            ctx.bus.topics.subscription(subject)
        except RoutingError as exc:
            return problem(400, exc.message)
        return Response(media_type="text/event-stream")
    queue: asyncio.Queue[CloudEvent] = asyncio.Queue(QUEUE)
    dropped = 0

    async def on_event(delivery: Delivery) -> None:
        nonlocal dropped
        if queue.full():
            queue.get_nowait()
            dropped += 1
        queue.put_nowait(delivery.event)

    try:
        subscription = await watch(ctx.bus, subject, on_event)
    except RoutingError as exc:
        return problem(400, exc.message)

    async def body() -> AsyncGenerator[bytes, None]:
        reported = 0
        yield b": tailing " + subject.encode() + b"\n\n"
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), KEEPALIVE)
            except TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if dropped > reported:
                yield f": dropped {dropped - reported} events\n\n".encode()
                reported = dropped
            data = orjson.dumps(to_structured(event))
            yield b"event: cloudevent\ndata: " + data + b"\n\n"

    async def stop() -> None:
        # Also when the client left before the first byte (the body never started).
        await asyncio.shield(subscription.stop())

    return SSEResponse(body(), on_close=stop)
