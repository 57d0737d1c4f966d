"""The blocking client: each call runs its :class:`~a2a_bus.client.aio.AsyncClient`
twin on the bus loop and waits for it, from any thread but that loop's."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from a2a_bus.client.aio import AsyncClient, next_item
from a2a_bus.client.calls import Call, EventPage
from a2a_bus.client.outgoing import OutgoingStream
from a2a_bus.runtime.portal import Portal
from a2a_bus.runtime.tracing import one_trace


class Client:
    """Blocking API of a bus, for threads other than the bus loop (scripts, agents)."""

    def __init__(self, aio: AsyncClient, portal: Portal) -> None:
        self.aio = aio
        self._run = portal.run

    def request(
        self, agent: str | None, method: str, params: Any = None, *, timeout: float | None = None
    ) -> Any:
        return self._run(self.aio.request(agent, method, params, timeout=timeout))

    def notify(self, agent: str | None, method: str, params: Any = None) -> None:
        self._run(self.aio.notify(agent, method, params))

    def publish(
        self, subject: str, data: Any = None, *, type: str | None = None, **extensions: Any
    ) -> str:
        return self._run(self.aio.publish(subject, data, type=type, **extensions))

    def read(
        self, subject: str, *, limit: int = 100, cursor: str | None = None, newest: bool = False
    ) -> EventPage:
        return self._run(self.aio.read(subject, limit=limit, cursor=cursor, newest=newest))

    def call(self, message: Any, *, timeout: float | None = None) -> Any:
        return self._run(self.aio.call(message, timeout=timeout))

    def batch(self, calls: Sequence[Call], *, timeout: float | None = None) -> list[Any]:
        return self._run(self.aio.batch(calls, timeout=timeout))

    def stream(
        self, agent: str | None, method: str, params: Any = None, *, timeout: float | None = None
    ) -> Iterator[Any]:
        items = self.aio.stream(agent, method, params, timeout=timeout)
        try:
            while True:
                try:
                    yield self._run(next_item(items))
                except StopAsyncIteration:
                    return
        finally:
            self._run(items.aclose())

    def stream_to(
        self,
        agent: str | None,
        method: str,
        chunks: Iterable[Any],
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """As :meth:`AsyncClient.stream_to`; ``chunks`` is iterated in this thread, not
        on the bus loop, so it may block or call the bus itself."""
        run = self._run
        stream = OutgoingStream(self.aio, agent, method, chunks, params)
        seq = 0
        sending = False
        with one_trace():  # this thread's context: the portal carries it to each part
            try:
                for chunk in chunks:
                    sending = True
                    run(stream.send(seq, chunk))
                    seq += 1
            except BaseException:
                if sending:
                    run(stream.abort(seq))
                raise
            return run(stream.end(seq, timeout))
