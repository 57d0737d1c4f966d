"""The ``LlmClient`` SPI: function-calling chat and token streaming, sync and async.

A backend only has to implement :meth:`LlmClient.chat`; the async and streaming
variants have working defaults (the async ones run the sync call in a worker
thread, the streaming ones deliver the whole answer as :meth:`LlmClient.as_stream`
items). Backends that can do better override them: the OpenAI-compatible client
implements the async pair and drives it from the sync pair.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence

from a2a_bus.llm.messages import ChatResponse, LlmMessage, ToolDefinition

#: A streamed item: a ``str`` is a content token; the last item is the full
#: :class:`ChatResponse` (with the assembled tool calls and usage).
StreamItem = str | ChatResponse


class LlmClient(abc.ABC):
    """A chat model backend."""

    #: Model used when a call does not name one.
    model: str = ""

    @abc.abstractmethod
    def chat(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        """One chat completion; the model may answer with several tool calls."""

    async def achat(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        return await asyncio.to_thread(
            self.chat, messages, tools, model=model, temperature=temperature
        )

    def stream(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> Iterator[StreamItem]:
        """Content tokens as they arrive, then the complete response."""
        yield from self.as_stream(self.chat(messages, tools, model=model, temperature=temperature))

    async def astream(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[StreamItem]:
        response = await self.achat(messages, tools, model=model, temperature=temperature)
        for item in self.as_stream(response):
            yield item

    def as_stream(self, response: ChatResponse) -> list[StreamItem]:
        """A whole answer as stream items: by default its content as one token."""
        return [response.content, response] if response.content else [response]

    def close(self) -> None:  # noqa: B027 - optional hook, no-op by default
        """Release connections (no-op by default)."""

    async def aclose(self) -> None:
        self.close()
