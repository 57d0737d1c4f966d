"""The HTTP side of the A2A binding: agent cards and the JSON-RPC endpoints.

``POST /a2a/{agent_id}`` speaks the A2A JSON-RPC binding for one bus agent and
``GET /a2a/{agent_id}/.well-known/agent-card.json`` serves its card;
``POST /a2a`` and ``GET /.well-known/agent-card.json`` are the gateway's own
endpoint (explicit method calls, routed to the agent that declares the method)
and card (one skill per agent). The gateway's bearer tokens, allow-lists and
body limit apply; the JSON-RPC envelope is read as ``POST /rpc`` reads it (the
gateway's adaptor, its integer bound). Tasks live on the bus (:mod:`.task_service`,
:mod:`.view`): any replica serves any task; their streams are :mod:`.task_stream`'s.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_bus.gateway.a2a.cards import CARD_PATH, agent_card, gateway_card
from a2a_bus.gateway.a2a.errors import A2ACode, A2AError
from a2a_bus.gateway.a2a.listing import list_result, page, parse_list
from a2a_bus.gateway.a2a.notifier import Notifier
from a2a_bus.gateway.a2a.params import camel_params, parse_send, parse_task_query
from a2a_bus.gateway.a2a.push import (
    PUSH_METHODS,
    PushConfig,
    PushOp,
    config_json,
    config_not_found,
    list_json,
    parse_query,
    parse_send_push,
    parse_set,
)
from a2a_bus.gateway.a2a.stores import open_task_store
from a2a_bus.gateway.a2a.task_service import TaskService
from a2a_bus.gateway.a2a.task_stream import last_event_id, sent_stream, subscription
from a2a_bus.gateway.a2a.view import TaskView
from a2a_bus.gateway.a2a.webhooks import WebhookSender
from a2a_bus.gateway.a2a.wire import Op, Version, check_version, method_of, task_json, task_result
from a2a_bus.gateway.auth import Access
from a2a_bus.gateway.context import CHALLENGE, GatewayContext, access_of, require_access
from a2a_bus.gateway.disconnect import ClientGone, DisconnectWatch
from a2a_bus.gateway.limits import BodyRefused, read_body
from a2a_bus.gateway.prom import DENIED
from a2a_bus.gateway.responses import JSONResponse, problem, rpc_error
from a2a_bus.gateway.rpc import CLIENT_GONE, parse
from a2a_bus.gateway.settings import DEFAULT_MAX_TASKS, DEFAULT_MAX_TASKS_PER_OWNER
from a2a_bus.gateway.tracing import serving_http
from a2a_bus.protocol import Failure, Kind, error_response, event_kind, result_response


class A2ABinding:
    """The A2A endpoints of one gateway, over the bus's tasks."""

    def __init__(
        self,
        gateway: GatewayContext,
        *,
        max_tasks: int = DEFAULT_MAX_TASKS,
        max_tasks_per_owner: int | None = DEFAULT_MAX_TASKS_PER_OWNER,
    ) -> None:
        self.gateway = gateway
        bus = gateway.bus
        # Without tokens every caller is the same owner: only the view's bound applies.
        per_owner = max_tasks_per_owner if gateway.authenticator.enabled else None
        settings = gateway.settings
        store = open_task_store(settings.a2a_task_store, bus.transport, bus.topics, settings.source)
        self.view = TaskView(
            bus.transport,
            bus.topics,
            bus.node,
            gateway.settings.source,
            max_bytes=gateway.settings.max_body_bytes,
            max_tasks=max_tasks,
            max_tasks_per_owner=per_owner,
            store=store,
            saving=False,  # the notifier says when (after a record's pushes went out)
        )
        self.tasks = TaskService(gateway, self.view, per_owner)
        sender = WebhookSender.from_settings(gateway.settings)
        self.notifier = Notifier(bus.transport, bus.topics, self.view, sender)
        self._started: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Follow the task log and deliver push notifications (once; the first A2A
        call does it if nothing did)."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        await asyncio.shield(self._started)

    async def _start(self) -> None:
        await self.view.start()
        await self.notifier.start()

    async def stop(self) -> None:
        if self._started is not None:
            self._started = None
            await self.notifier.stop()
            await self.view.stop()

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

    async def _reachable(self, access: Access, agent_id: str) -> bool:
        """Whether the endpoint of ``agent_id`` answers this caller: the agent is live,
        or it went away leaving tasks of the caller's (GetTask says how they ended; a
        send to it is still refused by the task service)."""
        if self._card(access, agent_id) is not None:
            return True
        if not access.may_see_agent(agent_id):
            return False

        def left() -> bool:
            return any(f.endpoint == agent_id for f in self.view.owned(access.identity))

        await self.start()
        if not left():
            await self.view.sync()  # a replica that has not read them yet
        return left()

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
        with serving_http(self.gateway, request):
            return await self._endpoint(request)

    async def _endpoint(self, request: Request) -> Response:
        ctx = self.gateway
        access = access_of(request)
        if access is None:
            DENIED.labels("unauthorized").inc()
            detail = "a valid bearer token is required"
            return rpc_error(401, A2ACode.INVALID_REQUEST, "Unauthorized", detail, CHALLENGE)
        agent_id: str | None = request.path_params.get("agent_id")
        if agent_id is not None and not await self._reachable(access, agent_id):
            detail = f"no live agent {agent_id!r} on this bus"
            return rpc_error(404, A2ACode.METHOD_NOT_FOUND, "Agent not found", detail)
        try:
            body = await read_body(
                request, ctx.settings.max_body_bytes, ctx.settings.request_timeout
            )
        except BodyRefused as exc:
            return rpc_error(exc.status, A2ACode.INVALID_REQUEST, exc.reason, str(exc))
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
            check_version(request.headers.get("a2a-version"))
            params = message.get("params")
            if not legacy:
                params = camel_params(params)
            await self.start()
            push = PUSH_METHODS.get(method)
            if push is not None:
                return await self._push(*push, params, id, access, agent_id)
            op, version = method_of(method)
            resume = last_event_id(request.headers.get("last-event-id"))
            return await self._dispatch(op, version, params, id, access, agent_id, watch, resume)
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
        resume: int | None,
    ) -> Response:
        tasks, owner = self.tasks, access.identity
        if op is Op.LIST:
            query = parse_list(params)
            # Also the tasks written a moment ago (on another replica, before a restart).
            await self.view.sync()
            mine = (f for f in self.view.tasks() if f.owner == owner and f.endpoint == agent_id)
            body = list_result(page(mine, query), query, version)
            return JSONResponse(result_response(body, id))
        if op is not Op.SEND and op is not Op.STREAM:
            task_id, history_length = parse_task_query(params)
            fold = await tasks.find(task_id, agent_id, owner)
            if op is Op.SUBSCRIBE:
                return subscription(self.view, fold, version, id, resume)
            if op is Op.CANCEL:
                fold = await tasks.cancel(fold)
            body = task_json(fold.task, version, history_length)
            return JSONResponse(result_response(body, id))
        request = parse_send(params, version)
        push = parse_send_push(params.get("configuration"), version)
        fold, start = await tasks.send(
            request.message, access, agent_id, stream=op is Op.STREAM, push=push
        )
        if op is Op.STREAM:
            return sent_stream(self.view, fold, version, id, start)
        if request.blocking:
            # A client that leaves stops waiting; the task goes on (GetTask finds it).
            fold = await watch.run(tasks.settled(fold.task.id, tasks.blocking_wait))
        body = task_result(fold.task, version, request.history_length)
        return JSONResponse(result_response(body, id))

    async def _push(
        self,
        op: PushOp,
        version: Version,
        params: Any,
        id: Any,
        access: Access,
        agent_id: str | None,
    ) -> Response:
        """The push-notification config methods (both versions)."""
        tasks, owner = self.tasks, access.identity
        if op is PushOp.SET:
            config = parse_set(params, version)
            fold = await tasks.find(config.task_id, agent_id, owner)
            config = await tasks.set_push(fold, config)
            return JSONResponse(result_response(config_json(config, version), id))
        query = parse_query(params, op, version)
        fold = await tasks.find(query.task_id, agent_id, owner)
        configs = [PushConfig.from_dict(c) for c in fold.push.values()]
        if op is PushOp.LIST:
            return JSONResponse(result_response(list_json(configs, query, version), id))
        wanted = query.config_id or query.task_id
        found = next((c for c in configs if c.config_id == wanted), None)
        if op is PushOp.GET:
            if found is None:
                raise config_not_found(query)
            return JSONResponse(result_response(config_json(found, version), id))
        if found is not None:
            await tasks.delete_push(fold, found.config_id)
        return JSONResponse(result_response(None, id))
