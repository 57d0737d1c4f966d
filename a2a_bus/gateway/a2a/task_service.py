"""Starting, continuing and canceling A2A tasks: records in the task log and
requests on the bus; what a task becomes is the view's to tell (:mod:`.view`).

A send writes the task's ``submitted`` record, then sends the agent the request
(``taskid`` set, its answers going to the task log), and waits until the view has
the task. The run is the agent's: no gateway holds it, so a gateway may go away
(or restart) and the task goes on. A task's id is made from the endpoint, the
caller and the message id, so a send repeated with the same ``messageId`` (to
any replica) finds the task it started and starts no second run.

Two replicas given the same send (or the same next turn) at once both write
their record, each naming a bus request of its own; the fold keeps the first, and
only the replica whose record it kept sends the agent its request.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.core.routing import RoutingError
from a2a_bus.gateway.a2a.calls import Call, called_method, plan
from a2a_bus.gateway.a2a.errors import (
    A2ACode,
    A2AError,
    invalid_params,
    task_not_found,
    too_many_tasks,
)
from a2a_bus.gateway.a2a.fold import TaskFold
from a2a_bus.gateway.a2a.model import Message
from a2a_bus.gateway.a2a.push import MAX_CONFIGS_PER_TASK, PushConfig, check_push_url
from a2a_bus.gateway.a2a.task_log import EntryKind
from a2a_bus.gateway.a2a.view import TaskView
from a2a_bus.gateway.auth import Access
from a2a_bus.gateway.context import GatewayContext
from a2a_bus.gateway.tracing import adopt
from a2a_bus.gateway.url_policy import AllowList
from a2a_bus.protocol import Failure, JsonRpcError, ext, new_id
from a2a_bus.runtime.tracing import ORIGIN

#: Task ids are made in this namespace (a UUID, so they look like any other id).
_TASK_IDS = uuid.UUID("8a6a3f0e-2f4b-4c36-9d35-5b3f8f7c2a10")


class TaskService:
    """The task operations of one gateway's A2A endpoints."""

    def __init__(
        self, gateway: GatewayContext, view: TaskView, max_tasks_per_owner: int | None
    ) -> None:
        self.gateway = gateway
        self.view = view
        self.max_tasks_per_owner = max_tasks_per_owner
        #: Checked once here (the settings refused a bad entry already).
        self.push_allow = AllowList.parse(gateway.settings.push_allow)

    @property
    def inactivity(self) -> float:
        """How long a task's agent may stay silent before the task fails."""
        settings = self.gateway.settings
        return settings.a2a_task_inactivity or settings.request_timeout

    # -- finding ----------------------------------------------------------------------

    async def find(self, task_id: str, endpoint: str | None, owner: str) -> TaskFold:
        """The caller's task on this endpoint, as the log has it when the call came:
        the view catches up first, so a task another replica created or moved on a
        moment ago is seen as it is now, never as it was; -32001 if there is none."""
        await self.view.sync()
        fold = self.view.find(task_id, endpoint, owner)
        if fold is None:
            raise task_not_found(task_id)
        return fold

    @property
    def blocking_wait(self) -> float:
        """How long a blocking send waits for its task to settle."""
        settings = self.gateway.settings
        return settings.a2a_blocking_wait or settings.request_timeout

    async def settled(self, task_id: str, wait: float) -> TaskFold:
        """The task once it is terminal or waits for input, or as it is after
        ``wait`` seconds."""
        deadline = asyncio.get_running_loop().time() + wait
        while True:
            fold = self.view.get(task_id)
            left = deadline - asyncio.get_running_loop().time()
            if fold is not None and (not fold.active or left <= 0):
                return fold
            if fold is None and left <= 0:  # forgotten meanwhile (the view is full)
                raise task_not_found(task_id)
            # asyncio.timeout, not wait_for: the wait is registered before this task
            # yields, so no change can come in between and be missed.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(left, 0.001)):
                    await self.view.updates.changed(task_id)

    async def known(self, task_id: str, version: int = 0) -> TaskFold:
        """The task once the view has folded it up to ``version``."""
        return await self.until(task_id, lambda fold: fold.version >= version)

    async def until(self, task_id: str, ready: Callable[[TaskFold], bool]) -> TaskFold:
        """The task once ``ready`` says so of it (after what this gateway wrote came
        back from the log); an internal error when it does not within the request
        timeout."""

        async def folded() -> TaskFold:
            while True:
                fold = self.view.get(task_id)
                if fold is not None and ready(fold):
                    return fold
                await self.view.updates.changed(task_id)

        try:
            return await asyncio.wait_for(folded(), self.gateway.settings.request_timeout)
        except TimeoutError:
            raise A2AError(
                A2ACode.INTERNAL_ERROR,
                f"task {task_id!r} was written to the task log but did not come back "
                "from it in time (is the broker reachable?)",
                {"taskId": task_id},
            ) from None

    # -- sending ----------------------------------------------------------------------

    async def send(
        self,
        message: Message,
        access: Access,
        endpoint: str | None,
        *,
        stream: bool,
        push: PushConfig | None = None,
    ) -> tuple[TaskFold, int | None]:
        """Start the task ``message`` asks for, or continue the one it names;
        ``push``: a webhook the send registers for the new task. Also the version
        the send's own updates start after (None: the task as it is now)."""
        if message.task_id is not None:
            return await self._continue(message, access, endpoint, stream=stream, push=push)
        owner = access.identity
        target = endpoint if endpoint is not None else self._owner(message, access)
        task_id = str(uuid.uuid5(_TASK_IDS, f"{endpoint}\n{owner}\n{message.message_id}"))
        earlier = self.view.get(task_id)
        if earlier is not None:
            return earlier, None  # the same send again: its task, and no second run
        bound = self.max_tasks_per_owner
        if bound is not None and self.view.unfinished(owner) >= bound:
            raise too_many_tasks(bound)
        card = self._card(access, target)
        if push is not None:  # refused before any task exists
            await check_push_url(push, self.push_allow)
        context_id = message.context_id or new_id()
        message.context_id, message.task_id = context_id, task_id
        request_id = _request_id(task_id)
        call, event = self._planned(card, message, access, task_id, request_id, stream=stream)
        submitted = {
            "owner": owner,
            "endpoint": endpoint,
            "agent": target,
            "contextId": context_id,
            "message": message.record(),
            "call": call.record(),
            "requestId": request_id,
            "inactivity": self.inactivity,
        }
        await self.view.write(EntryKind.SUBMITTED, task_id, submitted)
        if push is not None:
            pushed = push.for_task(task_id)
            await self.view.write(EntryKind.PUSH_SET, task_id, pushed.to_dict())
        fold = await self.known(task_id)
        if fold.request_id == request_id:  # the first send of this task: its request runs
            await self._request(task_id, event)
        return fold, 0

    async def _continue(
        self,
        message: Message,
        access: Access,
        endpoint: str | None,
        *,
        stream: bool,
        push: PushConfig | None,
    ) -> tuple[TaskFold, int | None]:
        """The caller's next message to a task that has not ended: the next call
        to its agent. A task still working has its running handler told to stop
        (as by a cancel): the new message supersedes the turn before. ``push``: a
        webhook the message registers for the task (as ``set`` would)."""
        task_id = message.task_id
        assert task_id is not None
        fold = await self.find(task_id, endpoint, access.identity)
        task = fold.task
        if task.state.terminal:
            raise A2AError(
                A2ACode.UNSUPPORTED_OPERATION,
                f"task {task_id!r} is {task.state.value} and takes no more messages; "
                "send without taskId (same contextId) to continue the conversation",
                {"taskId": task_id, "state": task.state.value},
            )
        if message.context_id not in (None, task.context_id):
            raise invalid_params(
                f"task {task_id!r} belongs to context {task.context_id!r}, not "
                f"{message.context_id!r}",
                taskId=task_id,
            )
        if any(m.message_id == message.message_id for m in task.history):
            return fold, None  # this message again (another replica took it): its task
        message.context_id = task.context_id
        card = self._card(access, fold.agent)
        request_id = _request_id(task_id)
        call, event = self._planned(card, message, access, task_id, request_id, stream=stream)
        if push is not None:  # as a set would (refused before the turn is written)
            await self.set_push(fold, push.for_task(task_id))
        version = fold.version
        if fold.active and fold.control is not None:
            self.gateway.dispatcher.cancel(fold.request_id, fold.control)
        turn = {"message": message.record(), "call": call.record(), "requestId": request_id}
        await self.view.write(EntryKind.TURN, task_id, turn)
        fold = await self.until(task_id, lambda fold: request_id in fold.turns)
        if fold.request_id == request_id:  # it was taken (not another's, nor too late)
            await self._request(task_id, event)
        return await self.known(task_id, version + 1), version + 1

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

    def _card(self, access: Access, agent_id: str) -> dict[str, Any]:
        card = self.gateway.directory.card(agent_id) if access.may_see_agent(agent_id) else None
        if card is None:  # it went away since the request arrived
            raise A2AError(A2ACode.METHOD_NOT_FOUND, f"no live agent {agent_id!r}", status=404)
        return card

    def _planned(
        self,
        card: dict[str, Any],
        message: Message,
        access: Access,
        task_id: str,
        request_id: str,
        *,
        stream: bool,
    ) -> tuple[Call, CloudEvent]:
        """The call a message makes, and its bus request, allowed for the caller."""
        target = str(card.get("id"))
        # The agent's session is the token's own: another token naming the same
        # contextId starts a conversation of its own rather than reading this one.
        session = f"{access.identity}/{message.context_id}"
        call = plan(card, message, session, stream=stream)
        event = self._event(call, target, task_id, request_id)
        reason = access.denies(event, target)
        if reason is not None and stream and call.streaming:
            # A stock client streams whenever the card can: a token that may call
            # the plain method only gets its answer as one artifact instead.
            plain = plan(card, message, session, stream=False)
            plain_event = self._event(plain, target, task_id, request_id)
            if access.denies(plain_event, target) is None:
                call, event, reason = plain, plain_event, None
        if reason is not None:
            raise A2AError(A2ACode.INVALID_REQUEST, f"Forbidden: {reason}", status=403)
        return call, event

    def _event(self, call: Call, agent_id: str, task_id: str, request_id: str) -> CloudEvent:
        """The bus request of a call, converted (and so checked) by the gateway's adaptor."""
        rpc: dict[str, Any] = {"jsonrpc": "2.0", "method": call.method, "id": request_id}
        if call.params is not None:
            rpc["params"] = call.params
        item = self.gateway.adaptor.from_json(rpc)[0]
        if isinstance(item, Failure):
            raise invalid_params(f"{item.message}: {item.data}" if item.data else item.message)
        attributes = item.get_attributes()
        attributes["id"] = request_id
        attributes[ext.TARGET_AGENT] = agent_id
        attributes[ext.TASK_ID] = attributes[ext.PARTITION_KEY] = task_id
        adopt(ORIGIN.get(), item)  # the HTTP request's trace
        return item

    async def _request(self, task_id: str, event: CloudEvent) -> None:
        """Send the agent its request; one that cannot go fails the task."""
        dispatcher = self.gateway.dispatcher
        try:
            route = dispatcher.route(event)
            await dispatcher.send_to(event, route, dispatcher.context.topics.tasks)
        except (RoutingError, JsonRpcError) as exc:
            error = exc.json_rpc_error() if isinstance(exc, RoutingError) else exc
            await self.view.write_failed(task_id, error.to_dict())

    # -- push notifications ---------------------------------------------------------------

    async def set_push(self, fold: TaskFold, config: PushConfig) -> PushConfig:
        """Register a webhook of the task (its URL checked first); setting an id
        again replaces that config."""
        if config.config_id not in fold.push and len(fold.push) >= MAX_CONFIGS_PER_TASK:
            raise invalid_params(
                f"task {fold.task.id!r} has {len(fold.push)} push notification configs, "
                "the most it may have; delete one first",
                taskId=fold.task.id,
            )
        await check_push_url(config, self.push_allow)
        await self.view.write(EntryKind.PUSH_SET, fold.task.id, config.to_dict())
        await self._pushed(fold, config.config_id, present=True)
        return config

    async def delete_push(self, fold: TaskFold, config_id: str) -> None:
        await self.view.write(EntryKind.PUSH_DELETED, fold.task.id, {"id": config_id})
        await self._pushed(fold, config_id, present=False)

    async def _pushed(self, fold: TaskFold, config_id: str, *, present: bool) -> None:
        """Wait until the view has the config (or no longer has it)."""
        while (config_id in fold.push) is not present:
            await self.view.updates.changed(fold.task.id)

    # -- canceling --------------------------------------------------------------------

    async def cancel(self, fold: TaskFold) -> TaskFold:
        """Cancel the task wherever its handler runs; the task ends ``canceled``."""
        task = fold.task
        if task.state.terminal:
            raise A2AError(
                A2ACode.TASK_NOT_CANCELABLE,
                f"task {task.id!r} is {task.state.value}",
                {"taskId": task.id, "state": task.state.value},
            )
        await self.view.write(EntryKind.CANCELED, task.id, {"reason": "canceled by the caller"})
        if fold.control is not None:
            self.gateway.dispatcher.cancel(fold.request_id, fold.control)
        # Ended: canceled, or how the agent's answer ended it first. (Not just its next
        # version: a streaming task's next chunk may come before the cancel.)
        return await self.until(task.id, lambda fold: fold.task.state.terminal)


def _request_id(task_id: str) -> str:
    """The id of one send's bus request for ``task_id`` (of this send alone: which
    send's request runs is the task log's to say)."""
    return f"{task_id}.{new_id()}"
