"""Server-Sent Events for streaming methods: one JSON-RPC response per event.

Each chunk is an ``event: chunk`` whose ``id`` is the chunk's ``seq`` (0, 1, ...)
and whose data is ``{"jsonrpc": "2.0", "result": <item>, "id": <request id>}``.
The stream ends with ``event: end`` (result ``{"chunks": n}``) or ``event: error``
(a JSON-RPC error response). A client that disconnects closes the upstream stream.

:class:`SSEResponse` is the response of every stream of the gateway: it closes its
body and runs its ``on_close`` however the response ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from a2a_bus.gateway.prom import RPC_ERRORS, code_label
from a2a_bus.protocol import ErrorCode, JsonRpcError, error_response, result_response

log = logging.getLogger(__name__)

MEDIA_TYPE = "text/event-stream"
_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class SSEResponse(StreamingResponse):
    """A Server-Sent Events response that always cleans up after itself.

    Starlette leaves the body unclosed when the client goes away, and never starts
    it when the client left before the first byte, so a generator's ``finally``
    alone is not enough: the body is closed here, and ``on_close`` releases what
    was opened before the response (a subscription, a running task).
    """

    def __init__(
        self,
        content: AsyncGenerator[bytes, None],
        *,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(content, media_type=MEDIA_TYPE, headers=_HEADERS)
        self._body = content
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except asyncio.CancelledError:
            # The server cancels a stream still open when its shutdown grace ends; the
            # connection is closed either way, and that is this response's end, not
            # an error to report with a traceback.
            pass
        finally:
            try:
                await self._body.aclose()
            finally:
                if self._on_close is not None:
                    await self._on_close()


def wants_sse(request: Request) -> bool:
    return MEDIA_TYPE in request.headers.get("accept", "")


def frame(data: dict[str, Any], event: str, id: int | None = None) -> bytes:
    """One SSE event; orjson output has no newlines, so one ``data:`` line is enough."""
    head = f"id: {id}\n" if id is not None else ""
    return f"{head}event: {event}\ndata: ".encode() + orjson.dumps(data) + b"\n\n"


async def _events(
    responses: AsyncGenerator[dict[str, Any], None], id: Any
) -> AsyncGenerator[bytes, None]:
    seq = 0
    try:
        async for response in responses:
            if "error" in response:
                yield _error_event(response)
                return
            yield frame(response, "chunk", seq)
            seq += 1
        yield frame(result_response({"chunks": seq}, id), "end")
    # The status line went out before the first chunk: a failure still reaches the
    # client as an error event, not as a torn connection.
    except JsonRpcError as exc:  # refused on the way (a record the broker refused)
        yield _error_event(error_response(exc.code, exc.message, id, exc.data))
    except Exception:
        log.exception("the stream answering request %r failed", id)
        yield _error_event(error_response(ErrorCode.INTERNAL_ERROR, "Internal error", id))
    finally:
        # Reached on a normal end and when the client went away (cancellation):
        # closing the stream forgets the request upstream.
        await responses.aclose()


def _error_event(response: dict[str, Any]) -> bytes:
    """The ``event: error`` ending a stream (counted by its code)."""
    RPC_ERRORS.labels(code_label(response["error"].get("code"))).inc()
    return frame(response, "error")


def sse_response(responses: AsyncGenerator[dict[str, Any], None], id: Any) -> SSEResponse:
    """The chunk responses of a streaming method (a request ``id``) as SSE events."""
    return SSEResponse(_events(responses, id))
