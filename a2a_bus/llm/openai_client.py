"""The default ``LlmClient``: any OpenAI-compatible chat-completions server.

One client serves OpenAI, Ollama (``http://localhost:11434/v1``) and vLLM
(``http://host:8000/v1``): only the base URL, key and model differ. It talks
HTTP with httpx (a core dependency), so no SDK is needed; it assembles several
tool calls per turn from plain and streamed answers, reports token usage and
retries transient failures (429, 5xx, connection errors) with exponential
backoff that honours ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from a2a_bus.llm.client import LlmClient, StreamItem
from a2a_bus.llm.errors import LlmError
from a2a_bus.llm.messages import ChatResponse, LlmMessage, ToolDefinition
from a2a_bus.llm.openai_wire import (
    SseDecoder,
    StreamAssembler,
    backoff_delay,
    build_body,
    error_from_response,
    iter_sse_data,
    parse_completion,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"


@dataclass(frozen=True, slots=True)
class RetryInfo:
    """Passed to ``on_retry`` before each wait."""

    attempt: int
    delay: float
    status: int | None
    reason: str


class _RetryBudget:
    """Counts attempts and decides the wait before the next one."""

    def __init__(self, client: OpenAIClient) -> None:
        self._client = client
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
        if client.on_retry is not None:
            client.on_retry(RetryInfo(self.attempt, delay, error.status, str(error)))
        return delay


class OpenAIClient(LlmClient):
    """Chat completions over HTTP, sync and async.

    Settings come from the arguments, else from the environment:
    ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` (optional for local servers) and
    ``A2A_LLM_MODEL``.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
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
        self._sync: httpx.Client | None = None
        # An httpx.AsyncClient belongs to the event loop that created it.
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"OpenAIClient(model={self.model!r}, base_url={self.base_url!r})"

    # -- connections -------------------------------------------------------

    def _sync_http(self) -> httpx.Client:
        if self._sync is None:
            self._sync = httpx.Client(headers=self._headers, timeout=self.timeout)
        return self._sync

    def _async_http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._async.get(loop)
        if client is None:
            client = httpx.AsyncClient(headers=self._headers, timeout=self.timeout)
            self._async[loop] = client
        return client

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    async def aclose(self) -> None:
        self.close()
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

    # -- sync --------------------------------------------------------------

    def chat(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        body = self._body(messages, tools, model, temperature, stream=False)
        budget = _RetryBudget(self)
        while True:
            headers: Mapping[str, str] | None = None
            try:
                response = self._sync_http().post(self._url, json=body)
            except httpx.TransportError as exc:
                error = self._unreachable(exc)
            else:
                if response.status_code < 400:
                    return _parse_json(response)
                error = error_from_response(response.status_code, response.text)
                headers = response.headers
            time.sleep(budget.delay_or_raise(error, headers))

    def stream(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> Iterator[StreamItem]:
        body = self._body(messages, tools, model, temperature, stream=True)
        budget = _RetryBudget(self)
        while True:
            started = False
            headers: Mapping[str, str] | None = None
            try:
                with self._sync_http().stream("POST", self._url, json=body) as response:
                    if response.status_code >= 400:
                        response.read()
                        error = error_from_response(response.status_code, response.text)
                        headers = response.headers
                    elif not _is_event_stream(response):
                        # The server ignored "stream": take the plain answer.
                        response.read()
                        answer = _parse_json(response)
                        if answer.content:
                            yield answer.content
                        yield answer
                        return
                    else:
                        started = True
                        assembler = StreamAssembler()
                        for payload in iter_sse_data(response.iter_lines()):
                            token = assembler.feed(payload)
                            if token:
                                yield token
                        yield assembler.response()
                        return
            except httpx.TransportError as exc:
                if started:
                    raise LlmError(f"LLM stream broke off: {type(exc).__name__}: {exc}") from exc
                error = self._unreachable(exc)
            time.sleep(budget.delay_or_raise(error, headers))

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
        budget = _RetryBudget(self)
        while True:
            headers: Mapping[str, str] | None = None
            try:
                response = await self._async_http().post(self._url, json=body)
            except httpx.TransportError as exc:
                error = self._unreachable(exc)
            else:
                if response.status_code < 400:
                    return _parse_json(response)
                error = error_from_response(response.status_code, response.text)
                headers = response.headers
            await asyncio.sleep(budget.delay_or_raise(error, headers))

    async def astream(
        self,
        messages: Sequence[LlmMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        model: str | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[StreamItem]:
        body = self._body(messages, tools, model, temperature, stream=True)
        budget = _RetryBudget(self)
        while True:
            started = False
            headers: Mapping[str, str] | None = None
            try:
                async with self._async_http().stream("POST", self._url, json=body) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        error = error_from_response(response.status_code, response.text)
                        headers = response.headers
                    elif not _is_event_stream(response):
                        await response.aread()
                        answer = _parse_json(response)
                        if answer.content:
                            yield answer.content
                        yield answer
                        return
                    else:
                        started = True
                        assembler = StreamAssembler()
                        async for payload in _aiter_sse_data(response):
                            token = assembler.feed(payload)
                            if token:
                                yield token
                        yield assembler.response()
                        return
            except httpx.TransportError as exc:
                if started:
                    raise LlmError(f"LLM stream broke off: {type(exc).__name__}: {exc}") from exc
                error = self._unreachable(exc)
            await asyncio.sleep(budget.delay_or_raise(error, headers))


def _is_event_stream(response: httpx.Response) -> bool:
    return "text/event-stream" in response.headers.get("content-type", "")


def _parse_json(response: httpx.Response) -> ChatResponse:
    try:
        data = response.json()
    except ValueError as exc:
        raise LlmError(f"LLM server sent invalid JSON: {response.text[:200]!r}") from exc
    return parse_completion(data)


async def _aiter_sse_data(response: httpx.Response) -> AsyncIterator[str]:
    decoder = SseDecoder()
    async for line in response.aiter_lines():
        payload = decoder.line(line)
        if payload is not None:
            yield payload
        if decoder.done:
            return
    payload = decoder.flush()
    if payload is not None:
        yield payload
