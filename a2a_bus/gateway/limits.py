"""Request body limits, enforced while the body is read (never after)."""

from __future__ import annotations

from starlette.requests import Request

from a2a_bus.protocol import whole_number


class BodyTooLarge(Exception):
    """The body is longer than the limit; nothing beyond the limit was buffered."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body exceeds the limit of {limit} bytes")
        self.limit = limit


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or :class:`BodyTooLarge` as soon as it passes ``limit``."""
    declared = request.headers.get("content-length")
    size = whole_number(declared)
    if size is not None and size > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)
