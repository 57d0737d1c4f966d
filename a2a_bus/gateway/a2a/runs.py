"""Running an A2A task on the bus: one call, or a stream of chunks, and the task's
state and artifact kept up to date as the answer arrives.

Each run reports what changed on the way through ``emit`` (the SSE stream of
``SendStreamingMessage`` renders it); the final state is on the task when the run's
asyncio task is done. A run nobody watches (a plain send) gathers a streaming
method's chunks by the client's rules (:func:`a2a_bus.core.service.collect`): up to
``max_bytes`` of JSON, else the task fails with -32005. A watched stream is not
limited, but what the task keeps of it (for ``GetTask``) is: up to ``max_bytes`` of
JSON, then the stored artifact stops growing and its metadata says it was cut.
Cancelling the asyncio task of a run closes the bus request (a stream's cancel
reaches the agent) and leaves the task ``canceled``.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import orjson
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.client import AsyncClient
from a2a_bus.core.service import JsonRpcService, collect
from a2a_bus.gateway.a2a.calls import Call, answer_parts
from a2a_bus.gateway.a2a.model import Artifact, Part, Task, TaskState
from a2a_bus.protocol import ErrorCode, JsonRpcError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StatusChanged:
    #: The task as it was when its status changed.
    snapshot: Task


@dataclass(frozen=True)
class ArtifactChunk:
    #: The parts that arrived, under the artifact's id.
    artifact: Artifact
    append: bool
    #: True when known to end the artifact; a streamed chunk is not known to until
    #: the next update (see :class:`LastChunks`).
    last_chunk: bool


Update = StatusChanged | ArtifactChunk
Emit = Callable[[Update], Awaitable[None]]


class LastChunks:
    """Marks the final chunk of each streamed artifact ``last_chunk``, as A2A asks.

    Whether a chunk is its artifact's last is only known when the next update comes
    or the run ends, so the newest streamed chunk is held back until then (one chunk,
    not the stream). A closing ``append`` update with no parts would send nothing
    late, but the spec has an artifact's ``parts`` REQUIRED (non-empty) in 1.0, and an
    empty text part instead would add a part to what a client assembles. A status
    update (an LLM tool's progress) releases the held chunk as not last, so progress
    is neither delayed nor reordered: an artifact that gets no chunk after such an
    update ends without a chunk marked last.
    """

    def __init__(self) -> None:
        self._held: ArtifactChunk | None = None

    def push(self, update: Update) -> list[Update]:
        """The updates to send now, in order, ``update`` possibly held back."""
        held = self._held
        self._held = None
        if isinstance(update, ArtifactChunk) and not update.last_chunk:
            self._held = update
            if held is None:
                return []
            ended = held.artifact.artifact_id != update.artifact.artifact_id
            return [replace(held, last_chunk=ended)]
        return [update] if held is None else [held, update]

    def end(self) -> list[Update]:
        """The held chunk, marked last: the run is over, however it ended."""
        held, self._held = self._held, None
        return [] if held is None else [replace(held, last_chunk=True)]


def status(task: Task) -> StatusChanged:
    return StatusChanged(copy.copy(task))


def error_parts(error: dict[str, Any]) -> list[Part]:
    """A JSON-RPC error object as a failed task's status message."""
    text = str(error.get("message") or "Error")
    detail = error.get("data")
    if isinstance(detail, str) and detail:
        text = f"{text}: {detail}"
    return [Part.text(f"{text} (error {error.get('code')})"), Part.data(error)]


class Run:
    """One task's execution against the bus."""

    def __init__(
        self,
        service: JsonRpcService,
        client: AsyncClient,
        task: Task,
        agent_id: str,
        call: Call,
        event: CloudEvent,
        timeout: float,
        max_bytes: int,
    ) -> None:
        self.service = service
        self.client = client
        self.task = task
        self.agent_id = agent_id
        self.call = call
        self.event = event
        self.timeout = timeout
        #: The bound of a streaming method's chunks gathered for a run nobody watches,
        #: and of what the task keeps of an answer.
        self.max_bytes = max_bytes
        self._artifact: Artifact | None = None
        # JSON bytes of the kept parts' values as one list: brackets, less the first comma.
        self._kept = 1
        #: The metadata of a stored artifact that was cut (None while it is whole).
        self._omitted: dict[str, Any] | None = None

    async def __call__(self, emit: Emit | None = None) -> None:
        """Run the call; ``emit`` gets each update (None: nobody watches, so a
        streaming method's chunks are gathered, bounded, into the answer)."""
        task = self.task
        try:
            if not self.call.streaming:
                error = await self._once(emit)
            elif emit is None:
                error = await self._collected()
            else:
                error = await self._stream(emit)
        except asyncio.CancelledError:
            task.set_state(TaskState.CANCELED, task.agent_message([Part.text("canceled")]))
            raise
        except Exception:
            log.exception("A2A task %s (%s) failed in the gateway", task.id, self.call.method)
            error = {"code": -32603, "message": "Internal error"}
        if error is None:
            task.set_state(TaskState.COMPLETED)
        else:
            task.set_state(TaskState.FAILED, task.agent_message(error_parts(error)))

    async def _once(self, emit: Emit | None) -> dict[str, Any] | None:
        response = (await self.service.answer(self.event, timeout=self.timeout)).response
        if response is None:
            return {"code": -32603, "message": "Internal error", "data": "no answer"}
        if "error" in response:
            error: dict[str, Any] = response["error"]
            return error
        parts = answer_parts(response.get("result"))
        artifact = Artifact([])
        self.task.artifacts.append(artifact)
        self._keep(artifact, parts)  # bounded as a stream's parts are
        if emit is not None:
            whole = Artifact(parts, artifact.name, artifact.artifact_id)
            await emit(ArtifactChunk(whole, append=False, last_chunk=True))
        return None

    async def _stream(self, emit: Emit) -> dict[str, Any] | None:
        """Each chunk onto the task and out through ``emit`` as it comes."""
        try:
            async for _ in self._chunks(emit):
                pass
        except JsonRpcError as exc:
            return exc.to_dict()
        return None

    async def _collected(self) -> dict[str, Any] | None:
        """Each chunk onto the task as it comes (GetTask shows the answer growing),
        gathered by the client's rules: past ``max_bytes`` the task fails with -32005."""
        response = await collect(self._chunks(None), self.task.id, self.max_bytes)
        error: dict[str, Any] | None = response.get("error")
        if error is not None and error.get("code") == ErrorCode.TOO_LARGE:
            error["data"] = f"{error.get('data')}; over A2A, SendStreamingMessage (message/stream)"
        return error

    async def _chunks(self, emit: Emit | None) -> AsyncGenerator[dict[str, Any], None]:
        """The stream's chunks as JSON-RPC responses, each put on the task once the
        consumer asks for the next: one :func:`collect` refuses is never put there.
        Closing it closes the bus stream (a streaming agent is told to stop)."""
        call = self.call
        items = self.client.stream(self.agent_id, call.method, call.params, timeout=self.timeout)
        try:
            async for item in items:
                yield {"jsonrpc": "2.0", "result": item, "id": self.task.id}
                await self._apply(item, emit)
        finally:
            await items.aclose()

    async def _apply(self, item: Any, emit: Emit | None) -> None:
        task = self.task
        if self.call.conversational and _is_progress(item):
            task.set_state(TaskState.WORKING, task.agent_message([Part.data(item)]))
            if emit is not None:
                await emit(status(task))
            return
        artifact = self._artifact
        parts = _chunk_parts(item, self.call.conversational, artifact is not None)
        if not parts:
            return
        append = artifact is not None
        if artifact is None:
            artifact = self._artifact = Artifact([])
            task.artifacts.append(artifact)
        self._keep(artifact, parts)
        if emit is not None:
            delta = Artifact(parts, artifact.name, artifact.artifact_id)
            await emit(ArtifactChunk(delta, append=append, last_chunk=False))  # not known yet

    def _keep(self, artifact: Artifact, parts: list[Part]) -> None:
        """Put parts on the stored artifact while the task stays within ``max_bytes``
        of JSON; from the first that does not fit on, they are only counted in the
        artifact's metadata (the stream itself goes on)."""
        for part in parts:
            size = _json_size(part)
            if self._omitted is None:
                if part.kind == "text" and artifact.ends_with_text:
                    grown = self._kept + size  # joined onto the text part before it
                else:
                    grown = self._kept + size + (3 if part.kind == "text" else 1)  # quotes, comma
                if grown <= self.max_bytes:
                    self._kept = grown
                    artifact.extend([part])
                    continue
                self._omitted = artifact.metadata = {
                    "truncated": True,
                    "omittedParts": 0,
                    "omittedBytes": 0,
                    "maxBytes": self.max_bytes,
                }
            self._omitted["omittedParts"] += 1
            self._omitted["omittedBytes"] += size


def _json_size(part: Part) -> int:
    """The bytes of a part's value as JSON (a text's without its quotes)."""
    if part.kind == "text":
        return len(orjson.dumps(part.value)) - 2
    # default=repr only sizes what the transport may still refuse, as collect does.
    return len(orjson.dumps(part.value, default=repr))


#: Chunks of the LLM runtime's ``chat/stream`` (see ``a2a_bus.llm.chunks``).
_TOKEN, _DONE = "token", "done"
_PROGRESS = ("tool_start", "tool_end")


def _is_progress(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") in _PROGRESS


def _chunk_parts(item: Any, conversational: bool, started: bool) -> list[Part]:
    """The parts one stream item adds to the answer."""
    if conversational and isinstance(item, dict):
        kind = item.get("type")
        if kind == _TOKEN and isinstance(item.get("text"), str):
            return [Part.text(item["text"])] if item["text"] else []
        if kind == _DONE:
            content = item.get("content")
            # The tokens already carried the answer; a run that streamed none has it here.
            return [Part.text(content)] if isinstance(content, str) and not started else []
    return answer_parts(item)
