"""A stream from a caller to an agent (``stream_to``): its chunks, an abort on the
way out of a failure, and its end, which the handler's result answers.

Every part carries the stream's session id and its place (``_seq``); the async
and the sync client both send a stream through :class:`OutgoingStream`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Awaitable, Iterable, Mapping
from typing import Any, Protocol

from a2a_bus.core.streams import ABORT_PARAM, CHUNK_PARAM, END_PARAM
from a2a_bus.protocol.events import new_session_id

log = logging.getLogger(__name__)


class Sender(Protocol):
    """What a stream needs of a client: a notification and a request."""

    async def notify(self, agent: str | None, method: str, params: Any = None) -> None: ...

    async def request(
        self, agent: str | None, method: str, params: Any = None, *, timeout: float | None = None
    ) -> Any: ...


class OutgoingStream:
    """One caller -> agent stream of ``method`` on ``agent``, sent through ``sender``.

    Made before the first chunk is taken from the caller's iterable: ``chunks``
    and ``params`` are checked then (TypeError, nothing sent).
    """

    def __init__(
        self,
        sender: Sender,
        agent: str | None,
        method: str,
        chunks: Any,
        params: dict[str, Any] | None,
    ) -> None:
        self._sender = sender
        self._agent = agent
        self._method = method
        self._base = _stream_base(chunks, params)

    async def send(self, seq: int, chunk: Any) -> None:
        """Chunk ``seq`` of the stream."""
        params = {**self._base, "_seq": seq, CHUNK_PARAM: chunk}
        await self._sender.notify(self._agent, self._method, params)

    async def abort(self, seq: int) -> None:
        """The handler may have started: end its stream now, not after its idle time."""
        abort = {**self._base, "_seq": seq, END_PARAM: True, ABORT_PARAM: True}
        await _quietly(self._sender.notify(self._agent, self._method, abort))

    async def end(self, seq: int, timeout: float | None) -> Any:
        """The end of a stream of ``seq`` chunks: answered with the handler's result."""
        end = {**self._base, "_seq": seq, END_PARAM: True}
        return await self._sender.request(self._agent, self._method, end, timeout=timeout)


def _stream_base(chunks: Any, params: dict[str, Any] | None) -> dict[str, Any]:
    """The params every part of a new caller -> agent stream carries; TypeError, before
    anything is sent, for ``chunks`` that are no stream of chunks or ``params`` that
    are no object."""
    if isinstance(chunks, str | bytes | bytearray | Mapping):
        # Iterable, but its items are not what was meant.
        unit = "key" if isinstance(chunks, Mapping) else "character or byte"
        raise TypeError(
            f"stream_to: chunks must be an iterable of the chunks to send, not a "
            f"{type(chunks).__name__}, which would go one {unit} per chunk; to send it "
            "as one chunk, pass [value]"
        )
    if not isinstance(chunks, Iterable | AsyncIterable):
        raise TypeError(
            f"stream_to: chunks must be an iterable of the chunks to send (a list, a "
            f"generator, an async iterable), not {chunks!r:.60}"
        )
    if params is not None and not isinstance(params, dict):
        raise TypeError(
            f"stream_to: params must be a dict of the handler's other named params, not "
            f"{params!r:.60}"
        )
    return {**(params or {}), "_sessionId": new_session_id()}


async def _quietly(send: Awaitable[None]) -> None:
    """Send a best-effort message on the way out of a failure (or a cancel)."""
    try:
        await asyncio.shield(send)
    except (Exception, asyncio.CancelledError) as exc:
        log.debug("a best-effort message was not sent: %r", exc)
