"""Request body limits, enforced while the body is read (never after)."""

from __future__ import annotations

import asyncio

from starlette.requests import Request

from a2a_bus.protocol import whole_number


class BodyRefused(Exception):
    """A body the gateway stopped reading; ``status`` is the HTTP answer."""

    status = 400
    reason = "Bad request"


class BodyTooLarge(BodyRefused):
    """The body is longer than the limit; nothing beyond the limit was buffered."""

    status = 413
    reason = "Request too large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body exceeds the limit of {limit} bytes")
        self.limit = limit


class BodyTooSlow(BodyRefused):
    """The body did not arrive in time: a client that sends part of it and waits
    would otherwise hold a connection (and a request in flight) for good."""

    status = 408
    reason = "Request timeout"

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the request body did not arrive within {seconds:g} s")
        self.seconds = seconds


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The request body; :class:`BodyTooLarge` as soon as it passes ``limit``,
    :class:`BodyTooSlow` when it is not all there within ``timeout`` seconds."""
    declared = request.headers.get("content-length")
    size = whole_number(declared)
    if size is not None and size > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge(limit)
                chunks.append(chunk)
    except TimeoutError:
        raise BodyTooSlow(timeout) from None
    return b"".join(chunks)
