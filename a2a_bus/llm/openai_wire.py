"""The OpenAI chat-completions wire format: request bodies, responses, SSE chunks.

Pure functions and a small stream assembler, shared by the sync and async
halves of :class:`~a2a_bus.llm.openai_client.OpenAIClient`.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from typing import Any

from a2a_bus.llm.errors import LlmError
from a2a_bus.llm.messages import (
    ChatResponse,
    LlmMessage,
    ToolCall,
    ToolDefinition,
    Usage,
    new_call_id,
    well_formed,
)

#: Statuses worth another try: timeouts, conflicts, rate limits, server errors.
RETRYABLE_STATUS = frozenset((408, 409, 429, 500, 502, 503, 504))


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


def build_body(
    messages: Sequence[LlmMessage],
    tools: Sequence[ToolDefinition],
    *,
    model: str,
    temperature: float | None,
    stream: bool,
    stream_usage: bool = True,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [m.to_dict() for m in messages]}
    if tools:
        body["tools"] = [t.to_dict() for t in tools]
    if temperature is not None:
        body["temperature"] = temperature
    if stream:
        body["stream"] = True
        if stream_usage:
            body["stream_options"] = {"include_usage": True}
    return body


#: The largest token count believed: 2**53 - 1, exact in every JSON reader, and sums
#: of many stay within the 64-bit integers the bus carries.
MAX_TOKEN_COUNT = (1 << 53) - 1


def parse_usage(data: Any) -> Usage:
    if not isinstance(data, Mapping):
        return Usage()
    try:
        return Usage(
            _token_count(data.get("prompt_tokens")), _token_count(data.get("completion_tokens"))
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise LlmError(f"malformed usage from the server: {str(data)[:200]!r}") from exc


def _token_count(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise TypeError("a token count is a number")
    count = int(value)
    if not 0 <= count <= MAX_TOKEN_COUNT:
        raise ValueError(f"token count {count} out of range")
    return count


def parse_completion(data: Any) -> ChatResponse:
    """A non-streamed chat completion body -> :class:`ChatResponse`."""
    if isinstance(data, Mapping) and "error" in data and not data.get("choices"):
        # Some proxies answer a failure with HTTP 200: report the server's own message.
        raise LlmError(f"LLM server answered an error: {describe_error(data)}")
    try:
        choice = data["choices"][0]
        message = LlmMessage.from_dict({"role": "assistant", **choice["message"]})
    except (KeyError, IndexError, TypeError, ValueError, RecursionError) as exc:
        raise LlmError(f"malformed chat completion from the server: {exc!r}") from exc
    return ChatResponse(
        message=message,
        finish_reason=str(
            choice.get("finish_reason") or ("tool_calls" if message.tool_calls else "stop")
        ),
        usage=parse_usage(data.get("usage")),
        model=str(data.get("model") or ""),
    )


class SseDecoder:
    """Incremental Server-Sent Events decoder: feed lines, get ``data`` payloads.

    ``done`` turns true at the ``[DONE]`` sentinel the chat API ends streams with;
    a stream whose input ends without it may have been cut off.
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self.done = False

    def line(self, line: str) -> str | None:
        """Take one line (without its newline); return a payload when an event ends."""
        if not line:
            return self.flush()
        if line.startswith(":"):
            return None  # comment / keep-alive
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def flush(self) -> str | None:
        if not self._data:
            return None
        payload = "\n".join(self._data)
        self._data.clear()
        if payload.strip() == "[DONE]":
            self.done = True
            return None
        return payload

    async def payloads(self, lines: AsyncIterable[str]) -> AsyncIterator[str]:
        """The ``data`` payloads of ``lines``, up to ``[DONE]`` or the end of input."""
        async for line in lines:
            payload = self.line(line)
            if payload is not None:
                yield payload
            if self.done:
                return
        payload = self.flush()
        if payload is not None:
            yield payload


class StreamAssembler:
    """Accumulates streamed chunks (content and tool-call deltas) into one response.

    Tool-call deltas arrive keyed by ``index``: the first delta of a call has
    its id and name, later ones append fragments of the JSON arguments, and the
    deltas of several calls may interleave.
    """

    def __init__(self) -> None:
        self._content: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish_reason: str | None = None
        self._usage = Usage()
        self._model = ""

    def feed(self, payload: str) -> str | None:
        """Take one ``data`` payload; return its content token, if any."""
        try:
            chunk = json.loads(payload)
        except (ValueError, RecursionError) as exc:
            raise LlmError(f"malformed stream chunk from the server: {payload[:200]!r}") from exc
        if not isinstance(chunk, dict):
            raise LlmError(f"malformed stream chunk from the server: {payload[:200]!r}")
        if "error" in chunk:
            raise LlmError(f"server error in stream: {describe_error(chunk)}")
        try:
            token = self._take(chunk)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            detail = f"{payload[:200]!r} ({type(exc).__name__}: {exc})"
            raise LlmError(f"malformed stream chunk from the server: {detail}") from exc
        # Half a character may end one chunk: the token shows U+FFFD, the whole
        # answer (joined in response()) keeps the character.
        return None if token is None else well_formed(token)

    def _take(self, chunk: dict[str, Any]) -> str | None:
        self._model = str(chunk.get("model") or self._model)
        if chunk.get("usage"):
            self._usage = parse_usage(chunk["usage"])
        token: str | None = None
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text is not None and not isinstance(text, str):
                raise TypeError(f"content is {type(text).__name__}, not text")
            if text:
                self._content.append(text)
                token = text if token is None else token + text
            for part in delta.get("tool_calls") or ():
                self._add_tool_delta(part)
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
        return token

    def _add_tool_delta(self, part: Mapping[str, Any]) -> None:
        index = int(part.get("index", len(self._calls)))
        call = self._calls.setdefault(index, {"id": None, "name": "", "arguments": []})
        if part.get("id"):
            call["id"] = str(part["id"])
        function = part.get("function") or {}
        if function.get("name"):
            call["name"] += function["name"]
        arguments = function.get("arguments")
        if arguments:
            call["arguments"].append(
                arguments if isinstance(arguments, str) else json.dumps(arguments)
            )

    def response(self, *, done: bool) -> ChatResponse:
        """The assembled answer of a stream that ended (``done``: with ``[DONE]``).

        Some servers omit ``[DONE]`` but end with a ``finish_reason``; a stream
        with neither broke off, and its partial answer is not passed off as whole.
        """
        if not done and self._finish_reason is None:
            raise LlmError("LLM stream broke off: it ended before a finish_reason or [DONE]")
        calls = tuple(
            ToolCall(
                id=well_formed(call["id"] or new_call_id()),
                name=well_formed(call["name"]),
                arguments=well_formed("".join(call["arguments"]) or "{}"),
            )
            for _, call in sorted(self._calls.items())
        )
        content = well_formed("".join(self._content)) or None
        finish = self._finish_reason or ("tool_calls" if calls else "stop")
        return ChatResponse(LlmMessage.assistant(content, calls), finish, self._usage, self._model)


def describe_error(body: Any) -> str:
    """The human part of an error body (``{"error": {"message": ...}}``)."""
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            return str(error.get("message") or error)
        return str(error)
    return str(body)


def error_from_response(status: int, text: str) -> LlmError:
    try:
        detail = describe_error(json.loads(text))
    except ValueError:
        detail = text.strip()[:500] or "(empty body)"
    return LlmError(
        f"LLM server answered HTTP {status}: {detail}",
        status=status,
        retryable=is_retryable_status(status),
    )


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The server's requested wait: ``retry-after-ms``, or ``Retry-After`` seconds or date."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def backoff_delay(
    attempt: int,
    headers: Mapping[str, str] | None,
    *,
    base: float,
    cap: float,
    max_retry_after: float,
) -> float:
    """Wait before retry ``attempt`` (1-based): Retry-After wins, else jittered exponential."""
    if headers is not None:
        requested = retry_after_seconds(headers)
        if requested is not None:
            return min(requested, max_retry_after)
    delay = min(cap, base * (2 ** (attempt - 1)))
    return delay * (0.75 + random.random() * 0.25)
