"""Noticing that an HTTP client went away while its plain (non-SSE) answer is built.

Starlette notices a disconnect only while it streams a response, so an endpoint
that takes long to build one answer (a streaming method collected into a list)
races that work against the client's ``http.disconnect`` itself. The work is
cancelled when the client leaves first, so its ``finally`` closes what it opened
(a bus stream: the request is forgotten and the agent told to stop).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from starlette.types import Receive

T = TypeVar("T")


class ClientGone(BaseException):
    """The client disconnected before its answer was ready.

    A BaseException, as :class:`asyncio.CancelledError` is: the code between the
    watch and the endpoint answers any ``Exception`` as a failure of the work
    (logged, -32603), which the client's leaving is not.
    """


class DisconnectWatch:
    """Races work against the client's disconnect, for one request.

    The request's ``receive`` is read by one task only, started on the first
    :meth:`run` (so requests that never need it pay nothing); :meth:`close` stops it.
    The body must have been read in full before.
    """

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._watching: asyncio.Task[None] | None = None

    async def run(self, work: Awaitable[T]) -> T:
        """The result of ``work``; :class:`ClientGone` once the client left first."""
        if self._watching is None:
            self._watching = asyncio.create_task(self._until_disconnect())
        task = asyncio.ensure_future(work)
        try:
            await asyncio.wait((task, self._watching), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                task.cancel()
        if task.done() and not task.cancelled():
            return task.result()
        with contextlib.suppress(asyncio.CancelledError):
            await task  # its cleanup runs before the caller moves on
        raise ClientGone

    async def _until_disconnect(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass

    def close(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
