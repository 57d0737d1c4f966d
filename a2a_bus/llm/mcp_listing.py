"""An MCP server's tool listings, kept to the tools the SDK accepts.

The SDK refuses a whole ``tools/list`` answer for one tool of the wrong shape (an
input schema that is no object, say), which would lose the server's good tools too.
:class:`SoundListings` wraps the server's transport: it notes the ids of ``tools/list``
requests and, in their answers, leaves out each tool the SDK would refuse, with a
warning naming it.

The SDK (an optional dependency) is imported where it is used, as in
:mod:`a2a_bus.llm.mcp_connection`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

from a2a_bus.llm.mcp_servers import SEPARATOR

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)


class SoundListings:
    """A server's transport whose ``tools/list`` answers keep only the tools the SDK
    accepts: it refuses a whole listing for one bad tool (an input schema of the wrong
    shape), which would lose the server's good tools too. Each one left out is logged."""

    def __init__(self, transport: Any, server: str) -> None:
        self._transport = transport
        self._server = server
        #: The session's protocol version, known once the handshake is over.
        self.version: str | None = None
        #: Ids of the ``tools/list`` requests not answered yet.
        self._asked: set[Any] = set()

    async def __aenter__(self) -> tuple[_SiftedReads, _NotedWrites]:
        read, write = await self._transport.__aenter__()
        return _SiftedReads(read, self.sift), _NotedWrites(write, self._asked)

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._transport.__aexit__(*exc_info)

    def sift(self, item: Any) -> Any:
        """``item`` as read; a ``tools/list`` answer without the tools the SDK refuses."""
        from mcp.shared.message import SessionMessage
        from mcp_types import JSONRPCError, JSONRPCResponse

        message = item.message if isinstance(item, SessionMessage) else None
        if not isinstance(message, JSONRPCResponse | JSONRPCError) or message.id not in self._asked:
            return item
        self._asked.discard(message.id)
        if isinstance(message, JSONRPCResponse) and isinstance(message.result.get("tools"), list):
            result = message.result
            result["tools"] = [tool for tool in result["tools"] if self._sound(tool, result)]
        return item

    def _sound(self, tool: Any, result: dict[str, Any]) -> bool:
        """Whether the SDK takes ``tool``: ``result`` with that one tool is checked as the
        SDK checks a listing, and only the tool's own problems count."""
        from mcp_types import methods
        from mcp_types.version import LATEST_HANDSHAKE_VERSION
        from pydantic import ValidationError

        version = self.version or LATEST_HANDSHAKE_VERSION  # what the SDK assumes too
        try:
            methods.parse_server_result("tools/list", version, {**result, "tools": [tool]})
        except ValidationError as exc:
            problems = [e for e in exc.errors() if tuple(e["loc"][:2]) == ("tools", 0)]
            if not problems:  # the listing's own: the SDK says so for the whole of it
                return True
            first = problems[0]
            where = ".".join(str(part) for part in first["loc"][2:]) or "the tool"
            name = tool.get("name") if isinstance(tool, dict) else None
            log.warning(
                "MCP tool %s left out: server %r lists it wrongly (%s: %s)",
                repr(f"{self._server}{SEPARATOR}{name}") if isinstance(name, str) else "(unnamed)",
                self._server,
                where,
                first["msg"],
            )
            return False
        except (KeyError, ValueError):  # a version whose listings the SDK does not check
            pass
        return True


class _Relay:
    """A transport's stream, passed on."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._inner.__aexit__(*exc_info)


class _SiftedReads(_Relay):
    """A transport's read stream, each item passed through ``sift``."""

    def __init__(self, inner: Any, sift: Callable[[Any], Any]) -> None:
        super().__init__(inner)
        self._sift = sift

    @property
    def last_context(self) -> Any:  # the SDK reads a sender's context off the stream
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        return self._sift(await self._inner.receive())

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        return self._sift(await self._inner.__anext__())


class _NotedWrites(_Relay):
    """A transport's write stream, noting the ids of ``tools/list`` requests."""

    def __init__(self, inner: Any, asked: set[Any]) -> None:
        super().__init__(inner)
        self._asked = asked

    async def send(self, item: SessionMessage, /) -> None:
        from mcp_types import JSONRPCRequest

        if isinstance(item.message, JSONRPCRequest) and item.message.method == "tools/list":
            self._asked.add(item.message.id)
        await self._inner.send(item)
