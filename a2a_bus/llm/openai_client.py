"""The default ``LlmClient``: any OpenAI-compatible chat-completions server.

One client serves OpenAI, Ollama (``http://localhost:11434/v1``) and vLLM
(``http://host:8000/v1``): only the base URL, key and model differ. It talks
HTTP with httpx (a core dependency), so no SDK is needed; it assembles several
tool calls per turn from plain and streamed answers, reports token usage and
retries transient failures (429, 5xx, connection errors) with exponential
backoff that honours ``Retry-After``, all within one deadline per call.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from a2a_bus.llm._sync import idle_thread_loop
from a2a_bus.llm.client import LlmClient, StreamItem
from a2a_bus.llm.errors import LlmError
from a2a_bus.llm.messages import ChatResponse, LlmMessage, ToolDefinition
from a2a_bus.llm.openai_wire import (
    SseDecoder,
    StreamAssembler,
    backoff_delay,
    build_body,
    error_from_response,
    parse_completion,
)
from a2a_bus.runtime.portal import Portal

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"
#: Seconds one call may take in all, retries and their waits included.
DEFAULT_DEADLINE = 120.0

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryInfo:
    """Passed to ``on_retry`` before each wait."""

    attempt: int
    delay: float
    status: int | None
    reason: str


class _Deadline:
    """The end of one call's time: every wait of the call stops there.

    httpx's ``timeout`` bounds each read, so a server that sends a byte now and
    then, or asks to retry much later, would hold the call (and the agent) for good.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._end = None if seconds is None else asyncio.get_running_loop().time() + seconds

    def left(self) -> float | None:
        """Seconds left, or None without a deadline."""
        if self._end is None:
            return None
        return max(0.0, self._end - asyncio.get_running_loop().time())

    def expired(self) -> LlmError:
        return LlmError(f"the LLM call took longer than its deadline of {self.seconds:g}s")

    async def run(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable``, or raise :meth:`expired` when the deadline passes first."""
        scope = asyncio.timeout_at(self._end)
        try:
            async with scope:
                return await awaitable
        except TimeoutError:
            if scope.expired():
                raise self.expired() from None
            raise

    async def iterate(self, items: AsyncIterable[T]) -> AsyncIterator[T]:
        """``items``, each awaited within the deadline (a timeout scope cannot span
        a generator's ``yield``: the consumer would get the cancellation)."""
        iterator = aiter(items)
        while True:
            try:
                item = await self.run(anext(iterator))
            except StopAsyncIteration:
                return
            yield item


class _RetryBudget:
    """Counts attempts and decides the wait before the next one."""

    def __init__(self, client: OpenAIClient, deadline: _Deadline) -> None:
        self._client = client
        self._deadline = deadline
        self.attempt = 0

    def delay_or_raise(self, error: LlmError, headers: Mapping[str, str] | None) -> float:
        self.attempt += 1
        client = self._client
        if not error.retryable or self.attempt > client.max_retries:
            raise error
        delay = backoff_delay(
            self.attempt,
            headers,
            base=client.backoff,
            cap=client.max_backoff,
            max_retry_after=client.max_retry_after,
        )
        left = self._deadline.left()
        if left is not None and delay >= left:
            # A retry after the deadline would never be made: fail now, not then.
            raise LlmError(
                f"{error} (a retry in {delay:g}s would pass the call's deadline)",
                status=error.status,
            )
        if client.on_retry is not None:
            client.on_retry(RetryInfo(self.attempt, delay, error.status, str(error)))
        return delay


class OpenAIClient(LlmClient):
    """Chat completions over HTTP, sync and async.

    One implementation: the async methods; the sync ones run them on a loop thread
    the client starts on first use (``close()`` stops it).

    Settings come from the arguments, else from the environment:
    ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` (optional for local servers) and
    ``A2A_LLM_MODEL``. ``timeout`` bounds each connect and read; ``deadline`` (None:
    none) the whole of one ``chat`` or ``stream`` call, its retries and waits included.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        deadline: float | None = DEFAULT_DEADLINE,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        headers: Mapping[str, str] | None = None,
        stream_usage: bool = True,
        on_retry: Callable[[RetryInfo], None] | None = None,
    ) -> None:
        self.model = model or os.environ.get("A2A_LLM_MODEL") or DEFAULT_MODEL
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip(
            "/"
        )
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.deadline = deadline
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self.stream_usage = stream_usage
        self.on_retry = on_retry
        self._headers = {"Accept": "application/json", **(headers or {})}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._url = f"{self.base_url}/chat/completions"
        # An httpx.AsyncClient belongs to the event loop that created it: one for the
        # portal that runs the sync calls, one for each loop the async ones are awaited on.
        self._portal = Portal.on_thread("openai-client")
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"OpenAIClient(model={self.model!r}, base_url={self.base_url!r})"

    # -- connections -------------------------------------------------------

    def _async_http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._async.get(loop)
        if client is None:
            client = httpx.AsyncClient(headers=self._headers, timeout=self.timeout)
            self._async[loop] = client
        return client

    def close(self) -> None:
        """Close the connections of sync calls, and of async calls made from this
        thread's private loop (``AgentLoop.run``); use ``aclose`` on other loops."""
        loop = self._portal.attached
        if loop is not None:
            client = self._async.pop(loop, None)
            if client is not None:
                self._portal.run(client.aclose())
            self._portal.close()
        loop = idle_thread_loop()
        client = self._async.pop(loop, None) if loop is not None else None
        if loop is not None and client is not None:
            loop.run_until_complete(client.aclose())

    async def aclose(self) -> None:
        """Close the connections of calls made on the running loop."""
        client = self._async.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    def __enter__(self) -> OpenAIClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _body(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition],
        model: str | None,
        temperature: float | None,
        stream: bool,
    ) -> dict[str, Any]:
        return build_body(
            messages,
            tools,
            model=model or self.model,
            temperature=temperature,
            stream=stream,
            stream_usage=self.stream_usage,
        )

    def _unreachable(self, exc: Exception) -> LlmError:
        return LlmError(
            f"cannot reach the LLM server at {self._url}: {type(exc).__name__}: {exc}",
            retryable=True,
        )

    # -- sync: the async implementation, run on the portal's loop -------------

    def chat(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        return self._portal.run(self.achat(messages, tools, model=model, temperature=temperature))

    def stream(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> Iterator[StreamItem]:
        return self._portal.iterate(
            lambda: self.astream(messages, tools, model=model, temperature=temperature)
        )

    # -- async -------------------------------------------------------------

    async def achat(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        body = self._body(messages, tools, model, temperature, stream=False)
        deadline = _Deadline(self.deadline)
        budget = _RetryBudget(self, deadline)
        while True:
            headers: Mapping[str, str] | None = None
            try:
                response = await deadline.run(self._async_http().post(self._url, json=body))
            except httpx.TransportError as exc:
                error = self._unreachable(exc)
            else:
                if response.status_code < 400:
                    return _parse_json(response)
                error = error_from_response(response.status_code, response.text)
                headers = response.headers
            await deadline.run(asyncio.sleep(budget.delay_or_raise(error, headers)))

    async def astream(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[StreamItem]:
        body = self._body(messages, tools, model, temperature, stream=True)
        deadline = _Deadline(self.deadline)
        budget = _RetryBudget(self, deadline)
        http = self._async_http()
        while True:
            started = False
            headers: Mapping[str, str] | None = None
            try:
                request = http.build_request("POST", self._url, json=body)
                response = await deadline.run(http.send(request, stream=True))
                try:
                    if response.status_code >= 400:
                        await deadline.run(response.aread())
                        error = error_from_response(response.status_code, response.text)
                        headers = response.headers
                    elif not _is_event_stream(response):
                        await deadline.run(response.aread())
                        answer = _parse_json(response)
                        if answer.content:
                            yield answer.content
                        yield answer
                        return
                    else:
                        started = True
                        assembler = StreamAssembler()
                        decoder = SseDecoder()
                        lines = deadline.iterate(response.aiter_lines())
                        async for payload in decoder.payloads(lines):
                            token = assembler.feed(payload)
                            if token:
                                yield token
                        yield assembler.response(done=decoder.done)
                        return
                finally:
                    await response.aclose()
            except httpx.TransportError as exc:
                if started:
                    raise LlmError(f"LLM stream broke off: {type(exc).__name__}: {exc}") from exc
                error = self._unreachable(exc)
            await deadline.run(asyncio.sleep(budget.delay_or_raise(error, headers)))


def _is_event_stream(response: httpx.Response) -> bool:
    return "text/event-stream" in response.headers.get("content-type", "")


def _parse_json(response: httpx.Response) -> ChatResponse:
    try:
        data = response.json()
    except ValueError as exc:
        raise LlmError(f"LLM server sent invalid JSON: {response.text[:200]!r}") from exc
    except RecursionError:
        raise LlmError("malformed chat completion from the server: nested too deeply") from None
    return parse_completion(data)
