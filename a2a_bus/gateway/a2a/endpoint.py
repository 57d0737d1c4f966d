"""The HTTP side of the A2A binding: agent cards and the JSON-RPC endpoints.

``POST /a2a/{agent_id}`` speaks the A2A JSON-RPC binding for one bus agent and
``GET /a2a/{agent_id}/.well-known/agent-card.json`` serves its card;
``POST /a2a`` and ``GET /.well-known/agent-card.json`` are the gateway's own
endpoint (explicit method calls, routed to the agent that declares the method)
and card (one skill per agent). The gateway's bearer tokens, allow-lists and
body limit apply; the JSON-RPC envelope is checked by the gateway's adaptor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Any

from cloudevents.core.v1.event import CloudEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_bus.gateway.a2a.calls import Call, called_method, plan
from a2a_bus.gateway.a2a.cards import CARD_PATH, agent_card, gateway_card
from a2a_bus.gateway.a2a.errors import A2ACode, A2AError, invalid_params, task_not_found
from a2a_bus.gateway.a2a.model import Message, Part, Task, TaskState
from a2a_bus.gateway.a2a.runs import ArtifactChunk, LastChunks, Run, StatusChanged, Update
from a2a_bus.gateway.a2a.tasks import TaskRecord, TaskStore
from a2a_bus.gateway.a2a.wire import (
    Op,
    Version,
    artifact_update,
    check_version,
    method_of,
    parse_send,
    parse_task_query,
    status_update,
    task_json,
    task_result,
)
from a2a_bus.gateway.auth import Access
from a2a_bus.gateway.context import CHALLENGE, GatewayContext, access_of, require_access
from a2a_bus.gateway.disconnect import ClientGone, DisconnectWatch
from a2a_bus.gateway.limits import BodyTooLarge, read_body
from a2a_bus.gateway.prom import DENIED
from a2a_bus.gateway.responses import JSONResponse, problem, rpc_error
from a2a_bus.gateway.rpc import CLIENT_GONE, parse
from a2a_bus.gateway.settings import DEFAULT_MAX_TASKS, DEFAULT_MAX_TASKS_PER_OWNER
from a2a_bus.gateway.sse import SSEResponse, frame
from a2a_bus.gateway.tracing import adopt, serving_http
from a2a_bus.protocol import (
    Failure,
    Kind,
    error_response,
    event_kind,
    ext,
    new_id,
    result_response,
)
from a2a_bus.runtime.tracing import ORIGIN

log = logging.getLogger(__name__)

#: Updates a stream buffers before the run waits for the client to read them.
STREAM_BUFFER = 64


class A2ABinding:
    """The A2A endpoints of one gateway, with its store of recent tasks."""

    def __init__(
        self,
        gateway: GatewayContext,
        *,
        max_tasks: int = DEFAULT_MAX_TASKS,
        max_tasks_per_owner: int | None = DEFAULT_MAX_TASKS_PER_OWNER,
    ) -> None:
        self.gateway = gateway
        # Without tokens every caller is the same owner: only the store's bound applies.
        per_owner = max_tasks_per_owner if gateway.authenticator.enabled else None
        self.tasks = TaskStore(max_tasks, per_owner)
        # Runs are asyncio tasks: hold them until they finish.
        self._running: set[asyncio.Task[None]] = set()

    def routes(self) -> list[Route]:
        return [
            Route(CARD_PATH, self.gateway_card, methods=["GET"]),
            Route("/a2a", self.endpoint, methods=["POST"], name="a2a_gateway"),
            Route("/a2a/{agent_id}" + CARD_PATH, self.agent_card, methods=["GET"]),
            # The card's path before A2A 0.3.
            Route("/a2a/{agent_id}/.well-known/agent.json", self.agent_card, methods=["GET"]),
            Route("/a2a/{agent_id}", self.endpoint, methods=["POST"], name="a2a_agent"),
        ]

    @property
    def timeout(self) -> float:
        return self.gateway.settings.request_timeout

    # -- cards ----------------------------------------------------------------------

    def _card(self, access: Access, agent_id: str) -> dict[str, Any] | None:
        """The discovery card of a live agent this caller may see."""
        return self.gateway.directory.card(agent_id) if access.may_see_agent(agent_id) else None

    async def agent_card(self, request: Request) -> Response:
        access = require_access(request)
        agent_id = request.path_params["agent_id"]
        card = self._card(access, agent_id)
        if card is None:
            return problem(404, f"no live agent {agent_id!r}")
        url = str(request.url_for("a2a_agent", agent_id=agent_id))
        secured = self.gateway.authenticator.enabled
        return JSONResponse(agent_card(card, url, secured=secured))

    async def gateway_card(self, request: Request) -> Response:
        access = require_access(request)
        cards = [
            c for c in self.gateway.directory.cards() if access.may_see_agent(str(c.get("id")))
        ]
        urls = {
            str(c.get("id")): str(request.url_for("a2a_agent", agent_id=str(c.get("id"))))
            for c in cards
        }
        url = str(request.url_for("a2a_gateway"))
        secured = self.gateway.authenticator.enabled
        return JSONResponse(gateway_card(cards, url, urls, secured=secured))

    # -- the JSON-RPC endpoint --------------------------------------------------------

    async def endpoint(self, request: Request) -> Response:
        route = "/a2a/{agent_id}" if "agent_id" in request.path_params else "/a2a"
        with serving_http(self.gateway, request, route):
            return await self._endpoint(request)

    async def _endpoint(self, request: Request) -> Response:
        ctx = self.gateway
        access = access_of(request)
        if access is None:
            DENIED.labels("unauthorized").inc()
            detail = "a valid bearer token is required"
            return rpc_error(401, A2ACode.INVALID_REQUEST, "Unauthorized", detail, CHALLENGE)
        agent_id: str | None = request.path_params.get("agent_id")
        if agent_id is not None and self._card(access, agent_id) is None:
            detail = f"no live agent {agent_id!r} on this bus"
            return rpc_error(404, A2ACode.METHOD_NOT_FOUND, "Agent not found", detail)
        try:
            body = await read_body(request, ctx.settings.max_body_bytes)
        except BodyTooLarge as exc:
            return rpc_error(413, A2ACode.INVALID_REQUEST, "Payload too large", str(exc))
        items, batch = parse(ctx, body)
        if batch or len(items) != 1:
            detail = "the A2A binding takes one request per HTTP request, not a batch"
            return JSONResponse(
                error_response(A2ACode.INVALID_REQUEST, "Invalid Request", None, detail)
            )
        item = items[0]
        if isinstance(item, Failure):
            return JSONResponse(item.response())
        message = item.get_data()
        if type(message) is not dict or event_kind(item) is not Kind.REQUEST:
            detail = "A2A calls are JSON-RPC 2.0 requests with an id"
            id = message.get("id") if type(message) is dict else None
            return JSONResponse(
                error_response(A2ACode.INVALID_REQUEST, "Invalid Request", id, detail)
            )
        id = message.get("id")
        method = str(message.get("method"))
        legacy = "/" in method  # the 0.3 method names have a slash, the 1.0 ones none
        watch = DisconnectWatch(request.receive)
        try:
            op, version = method_of(method)
            check_version(request.headers.get("a2a-version"))
            params = message.get("params")
            return await self._dispatch(op, version, params, id, access, agent_id, watch)
        except A2AError as exc:
            if exc.status == 403:
                DENIED.labels("forbidden").inc()
            return JSONResponse(exc.response(id, legacy), exc.status)
        except ClientGone:
            return Response(status_code=CLIENT_GONE)  # nobody reads it; the status is for metrics
        finally:
            watch.close()

    async def _dispatch(
        self,
        op: Op,
        version: Version,
        params: Any,
        id: Any,
        access: Access,
        agent_id: str | None,
        watch: DisconnectWatch,
    ) -> Response:
        if op is Op.GET or op is Op.CANCEL:
            task_id, history_length = parse_task_query(params)
            record = self.tasks.find(task_id, agent_id, access.identity)
            if record is None:
                raise task_not_found(task_id)
            if op is Op.CANCEL:
                await self._cancel(record)
            body = task_json(record.task, version, history_length)
            return JSONResponse(result_response(body, id))
        request = parse_send(params, version)
        record, run = self._prepare(request.message, access, agent_id, stream=op is Op.STREAM)
        if op is Op.STREAM:
            queue: asyncio.Queue[Update] = asyncio.Queue(STREAM_BUFFER)
            runner = self._start(record, run, queue)
            events = self._events(record, runner, queue, version, id)

            async def stop() -> None:
                # Also when the client left before the first byte (the body never
                # started): the run would wait forever on its full queue.
                runner.cancel()

            return SSEResponse(events, on_close=stop)
        runner = self._start(record, run, None)
        if request.blocking and run.call.streaming:
            # Gathering a stream can take long: a client that leaves cancels the task.
            await watch.run(_settle(runner))
        elif request.blocking:
            await _settle(runner)
        body = task_result(record.task, version, request.history_length)
        return JSONResponse(result_response(body, id))

    # -- tasks ----------------------------------------------------------------------

    def _prepare(
        self, message: Message, access: Access, agent_id: str | None, *, stream: bool
    ) -> tuple[TaskRecord, Run]:
        """The task a message starts, stored, and its run (not started yet)."""
        ctx = self.gateway
        if message.task_id is not None:
            earlier = self.tasks.find(message.task_id, agent_id, access.identity)
            if earlier is None:
                raise task_not_found(message.task_id)
            raise A2AError(
                A2ACode.UNSUPPORTED_OPERATION,
                f"task {message.task_id!r} is {earlier.task.state.value} and takes no more "
                "messages; send without taskId (same contextId) to continue the conversation",
                {"taskId": message.task_id},
            )
        target = agent_id if agent_id is not None else self._owner(message, access)
        card = self._card(access, target)
        if card is None:  # it went away since the request arrived
            raise A2AError(A2ACode.METHOD_NOT_FOUND, f"no live agent {target!r}", status=404)
        context_id = message.context_id or new_id()
        # The agent's session is the token's own: another token naming the same
        # contextId starts a conversation of its own rather than reading this one.
        session = f"{access.identity}/{context_id}"
        call = plan(card, message, session, stream=stream)
        task = Task(context_id, [message])
        message.context_id, message.task_id = context_id, task.id
        event = self._event(call, target, task.id)
        reason = access.denies(event, target)
        if reason is not None and stream and call.streaming:
            # A stock client streams whenever the card can: a token that may call
            # the plain method only gets its answer as one artifact instead.
            plain = plan(card, message, session, stream=False)
            plain_event = self._event(plain, target, task.id)
            if access.denies(plain_event, target) is None:
                call, event, reason = plain, plain_event, None
        if reason is not None:
            raise A2AError(A2ACode.INVALID_REQUEST, f"Forbidden: {reason}", status=403)
        task.set_state(TaskState.WORKING)
        record = TaskRecord(task, agent_id, access.identity)
        self.tasks.add(record)
        limit = ctx.settings.max_body_bytes
        return record, Run(ctx.service, ctx.client, task, target, call, event, self.timeout, limit)

    def _owner(self, message: Message, access: Access) -> str:
        """The agent the gateway's own endpoint routes a message to: the method's owner."""
        method = called_method(message)
        if method is None:
            raise invalid_params(
                'this endpoint takes a data part {"method": ..., "params": ...}; to talk to '
                "one agent, use its own endpoint /a2a/{agent_id} (see the gateway's card)"
            )
        for card in self.gateway.directory.cards():
            agent_id = str(card.get("id"))
            if access.may_see_agent(agent_id) and any(
                m.get("name") == method for m in card.get("methods", ())
            ):
                return agent_id
        raise invalid_params(f"no agent on this bus offers the method {method!r}", method=method)

    def _event(self, call: Call, agent_id: str, request_id: str) -> CloudEvent:
        """The bus request of a call, converted (and so checked) by the gateway's adaptor."""
        rpc: dict[str, Any] = {"jsonrpc": "2.0", "method": call.method, "id": request_id}
        if call.params is not None:
            rpc["params"] = call.params
        item = self.gateway.adaptor.from_json(rpc)[0]
        if isinstance(item, Failure):
            raise invalid_params(f"{item.message}: {item.data}" if item.data else item.message)
        item.get_attributes()[ext.TARGET_AGENT] = agent_id
        adopt(ORIGIN.get(), item)  # the HTTP request's trace
        return item

    def _start(
        self, record: TaskRecord, run: Run, queue: asyncio.Queue[Update] | None
    ) -> asyncio.Task[None]:
        runner = asyncio.create_task(run(queue.put) if queue is not None else run())
        record.runner = runner
        self._running.add(runner)

        def finished(done: asyncio.Task[None]) -> None:
            self._running.discard(done)
            record.runner = None
            task = record.task
            if done.cancelled() and not task.state.terminal:  # cancelled before it ran
                task.set_state(TaskState.CANCELED, task.agent_message([Part.text("canceled")]))
            if not done.cancelled():
                done.exception()  # failures are on the task already; do not warn twice

        runner.add_done_callback(finished)
        return runner

    async def _cancel(self, record: TaskRecord) -> None:
        runner = record.runner
        if record.task.state.terminal or runner is None:
            raise A2AError(
                A2ACode.TASK_NOT_CANCELABLE,
                f"task {record.task.id!r} is {record.task.state.value}",
                {"taskId": record.task.id, "state": record.task.state.value},
            )
        runner.cancel()
        await asyncio.wait({runner}, timeout=self.timeout)

    async def _events(
        self,
        record: TaskRecord,
        runner: asyncio.Task[None],
        queue: asyncio.Queue[Update],
        version: Version,
        id: Any,
    ) -> AsyncGenerator[bytes, None]:
        """The SSE stream of a run: the task, its updates, then its final status."""
        task = record.task

        def event(result: Any) -> bytes:
            return frame(result_response(result, id), "message")

        def render(update: Update) -> bytes:
            if isinstance(update, StatusChanged):
                return event(status_update(update.snapshot, version))
            assert isinstance(update, ArtifactChunk)
            chunk = artifact_update(
                task,
                update.artifact,
                version,
                append=update.append,
                last_chunk=update.last_chunk,
            )
            return event(chunk)

        chunks = LastChunks()
        getter: asyncio.Future[Update] | None = None
        try:
            yield event(task_result(task, version))
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, runner}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    for update in chunks.push(getter.result()):
                        yield render(update)
                    continue
                getter.cancel()
                while not queue.empty():
                    for update in chunks.push(queue.get_nowait()):
                        yield render(update)
                break
            for update in chunks.end():
                yield render(update)
            yield event(status_update(task, version))
        finally:
            # Also reached when the client went away: the run stops and the bus
            # request is closed (a streaming agent is told to stop).
            if getter is not None:
                getter.cancel()
            if not runner.done():
                runner.cancel()


async def _settle(runner: asyncio.Task[None]) -> None:
    """Wait for a run to end (however it ends); a caller that goes away cancels it."""
    try:
        await asyncio.wait({runner})
    except asyncio.CancelledError:
        runner.cancel()
        raise
