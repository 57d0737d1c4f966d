"""LLM agents on the bus: an :class:`AgentLoop` served as an :class:`~a2a_bus.Agent`.

The agent answers ``chat`` (one conversation per session id), streams the run's
chunks from ``chat/stream``, forgets a session on ``reset``, and, with
triggers, answers every event of its subscribed subjects and publishes the
answer on an output subject. Its tools reach the bus through
:attr:`ToolContext.bus`; :mod:`a2a_bus.llm.bus_tools` has ready-made ones.

.. code-block:: python

    Support = agent_class_from_file("agents/support.agent.yaml")
    with Bus.memory() as bus:
        bus.spawn(Support)
        bus.client().request("support", "chat", {"message": "Hi", "session_id": "u-1"})
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.core.routing import RoutingError, subject_matches, validate_name, validate_subject
from a2a_bus.hosting.agent import Agent, method, subscribe
from a2a_bus.llm._sync import close_thread_loop
from a2a_bus.llm.builder import parse_agent_file
from a2a_bus.llm.bus_tools import bus_tools as make_bus_tools
from a2a_bus.llm.chunks import chunk_to_dict
from a2a_bus.llm.client import LlmClient
from a2a_bus.llm.errors import AgentConfigError, LlmError, MaxTurnsExceeded
from a2a_bus.llm.loop import AgentLoop
from a2a_bus.llm.mcp_tools import McpServerError, McpTools
from a2a_bus.llm.messages import LlmMessage
from a2a_bus.llm.output import AgentOutput
from a2a_bus.llm.tools import BUS_AGENT_KEY, BUS_CLIENT_KEY, ToolRegistry
from a2a_bus.llm.triggers import (
    answer_data,
    answer_id,
    event_prompt,
    finished_answer,
    session_conversation,
    trigger_conversation,
)
from a2a_bus.protocol import ErrorCode, JsonRpcError, ext
from a2a_bus.schedule import Schedule

log = logging.getLogger(__name__)

#: JSON-RPC error codes of LLM agents (implementation-defined server errors).
MAX_TURNS_EXCEEDED = -32020
LLM_FAILED = -32021
MCP_FAILED = -32022


def max_turns_error(exc: MaxTurnsExceeded) -> JsonRpcError:
    """The JSON-RPC error for a run that used its turns; ``data`` holds the checkpoint."""
    return JsonRpcError(
        MAX_TURNS_EXCEEDED,
        "Max turns exceeded",
        {"maxTurns": exc.max_turns, "checkpoint": exc.checkpoint.to_dict()},
    )


class LlmAgent(Agent):
    """An agent whose methods run an LLM agent loop (made by :func:`llm_agent_class`)."""

    #: The loop every replica runs (conversations live in its store); a replica whose
    #: loop mounts MCP servers runs a copy with their tools while it lives.
    loop: AgentLoop
    #: Subjects whose events become prompts.
    triggers: ClassVar[tuple[str, ...]] = ()
    #: Where answers to trigger events are published (None: not published).
    output_topic: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Subscriptions are declared by marking a handler; the subjects are data here,
        # so each class gets its own marked function.
        if cls.__dict__.get("triggers"):
            handler = _trigger_handler()
            for subject in cls.triggers:
                handler = subscribe(subject)(handler)
            cls.on_trigger = handler  # type: ignore[attr-defined]
        super().__init_subclass__(**kwargs)

    @method
    def chat(self, message: str, session_id: str | None = None) -> str:
        """Send a message and get the agent's answer; one conversation per session id."""
        return self._run(_checked(message), self._session(session_id)).content

    @method("chat/stream")
    def chat_stream(self, message: str, session_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Like chat, streamed: token, tool_start and tool_end chunks, then done."""
        conversation = self._session(session_id)
        self._mcp_ready()
        with _as_json_rpc_errors():
            for chunk in self.loop.stream(
                _checked(message), conversation=conversation, context=self._context()
            ):
                yield chunk_to_dict(chunk)

    @method
    def reset(self, session_id: str) -> bool:
        """Forget a session's conversation; true if there was one."""
        key = session_conversation(_checked(session_id, "session_id"))
        store = self.loop.store
        existed = bool(store.load(key))
        store.delete(key)
        return existed

    def on_start(self) -> None:
        # The MCP servers live as long as this replica. One that cannot start now is
        # tried again before the next run, which answers with its error if it still fails.
        if self.loop.mcp_servers:
            try:
                self._mount_mcp()
            except McpServerError as exc:
                log.warning("%s: %s (tried again at the next message)", self.agent_id, exc)

    def on_stop(self) -> None:
        # Runs in the actor thread: release what its runs opened there (the LLM client's
        # connections and the thread's private event loop), and stop its MCP servers.
        if self._mcp_finalizer is not None:
            self._mcp_finalizer()
        self.loop.client.close()
        close_thread_loop()

    # -- MCP servers -------------------------------------------------------------

    _mcp: McpTools | None = None
    _mcp_finalizer: weakref.finalize[Any, Any] | None = None

    def _mount_mcp(self) -> None:
        running = McpTools.start(self.loop.mcp_servers)
        self._mcp = running
        # Also when the replica crashes (no on_stop then) or the process exits.
        self._mcp_finalizer = weakref.finalize(self, running.close)
        self.loop = self.loop.with_tools(running.tools)

    def _mcp_ready(self) -> None:
        """Before a run: MCP servers that did not start, or died, start again; one that
        cannot is a JSON-RPC error naming it (the model is not asked)."""
        try:
            if self.loop.mcp_servers:
                self._mount_mcp()
            elif self._mcp is not None:
                self._mcp.revive()
        except McpServerError as exc:
            raise JsonRpcError(MCP_FAILED, "MCP server failed", str(exc)) from None

    # -- helpers ---------------------------------------------------------------

    def _session(self, session_id: str | None) -> str | None:
        if session_id is None:
            return None
        return session_conversation(_checked(session_id, "session_id"))

    def _context(self) -> Mapping[str, Any]:
        if not self.hosted:
            return {}
        return {BUS_CLIENT_KEY: self.client, BUS_AGENT_KEY: self.agent_id}

    def _run(self, prompt: str | None, conversation: str | None) -> AgentOutput:
        self._mcp_ready()
        with _as_json_rpc_errors():
            return self.loop.run(prompt, conversation=conversation, context=self._context())

    def answer_event(self, event: CloudEvent) -> str:
        """Answer a trigger event in its own conversation and publish the answer."""
        key = trigger_conversation(event.get_id())
        history = self.loop.store.load(key)
        content = finished_answer(history)
        if content is None:
            # A redelivered event whose run was cut short continues where it stopped.
            output = self._run(None if history else event_prompt(event), key)
            content = output.content
            if output.exit_reason == "exit_condition":
                self._store_final_answer(key, content)
        if self.output_topic is not None and self.client is not None:
            self.client.publish(
                self.output_topic,
                answer_data(self.agent_id, event, content),
                id=answer_id(self.agent_id, event),
                **{ext.COLLABORATION: event.get_id()},
            )
        else:
            log.debug("%s answered trigger %s (no output topic)", self.agent_id, event.get_id())
        return content

    def _store_final_answer(self, key: str, content: str) -> None:
        """A run its exit condition ended after a tool round gets its answer as the
        stored conversation's last message, so a redelivery publishes it rather than
        asking the model (and running its tools) again. A trigger's conversation is
        never continued, so no model sees that message."""
        store = self.loop.store
        stored = store.load(key)
        if finished_answer(stored) is None:  # it may have ended on an answer all the same
            store.save(key, [*stored, LlmMessage.assistant(content)])


def _checked(value: str, name: str = "message") -> str:
    if not value.strip():
        raise JsonRpcError(ErrorCode.INVALID_PARAMS, "Invalid params", f"{name} must not be empty")
    return value


@contextlib.contextmanager
def _as_json_rpc_errors() -> Iterator[None]:
    """The run's own failures as JSON-RPC errors (anything else is a crash)."""
    try:
        yield
    except MaxTurnsExceeded as exc:
        raise max_turns_error(exc) from None
    except LlmError as exc:
        raise JsonRpcError(LLM_FAILED, "LLM call failed", str(exc)) from None


def _trigger_handler() -> Any:
    def on_trigger(self: LlmAgent, event: CloudEvent) -> None:
        self.answer_event(event)

    return on_trigger


def llm_agent_class(
    loop: AgentLoop,
    agent_id: str,
    *,
    description: str = "",
    subscribe: Sequence[str] = (),
    output_topic: str | None = None,
    bus_tools: Sequence[str] = (),
    schedules: Sequence[Schedule] = (),
) -> type[LlmAgent]:
    """An :class:`~a2a_bus.Agent` subclass serving ``loop`` as ``agent_id``.

    ``subscribe`` subjects become event triggers answered on ``output_topic``;
    ``bus_tools`` names tools of :mod:`a2a_bus.llm.bus_tools` to add to the loop's
    own (the loop passed in is not changed); ``schedules`` run while the agent does
    (group ``agent_id``).
    """
    if not isinstance(loop, AgentLoop):
        raise AgentConfigError(f"an LLM agent needs an AgentLoop, got {type(loop).__name__}")
    try:
        validate_name(agent_id)
        for subject in subscribe:
            validate_subject(subject, wildcards=True)
        if output_topic is not None:
            validate_subject(output_topic)
    except RoutingError as exc:
        raise AgentConfigError(exc.message) from None
    if output_topic is not None:
        if not subscribe:
            raise AgentConfigError("output_topic needs subscribe (the topics to answer)")
        looping = [s for s in subscribe if subject_matches(s, output_topic)]
        if looping:
            raise AgentConfigError(
                f"output_topic {output_topic!r} matches subscribe {looping[0]!r}: "
                "the agent would answer its own answers"
            )
    if bus_tools:
        try:
            extra = make_bus_tools(bus_tools)
            tools = ToolRegistry([*loop.tools, *extra])
        except ValueError as exc:
            raise AgentConfigError(str(exc)) from None
        loop = copy.copy(loop)
        loop.tools = tools
    namespace = {
        "agent_id": agent_id,
        "description": description or f"LLM agent {loop.name} ({loop.model})",
        "loop": loop,
        "triggers": tuple(subscribe),
        "output_topic": output_topic,
        "schedules": tuple(schedules),
        "__module__": __name__,
    }
    name = "LlmAgent_" + "".join(c if c.isalnum() else "_" for c in agent_id)
    return type(name, (LlmAgent,), namespace)


def agent_class_from_file(
    path: str | os.PathLike[str],
    context: Mapping[str, Any] | None = None,
    *,
    client: LlmClient | None = None,
) -> type[LlmAgent]:
    """The bus agent an agent file describes (``id``, ``subscribe``, ``output_topic``,
    ``bus_tools`` besides the loop's keywords).

    Without ``client`` an :class:`~a2a_bus.llm.OpenAIClient` configured from the
    environment serves the file's model. Mistakes raise ``AgentFileError`` naming
    the file and line.
    """
    builder, settings = parse_agent_file(path)
    if settings.agent_id is None:
        raise AgentConfigError(
            f"{path}: name {builder.agent_name!r} is not a valid agent id; add an id: keyword"
        )
    if client is None:
        from a2a_bus.llm.openai_client import OpenAIClient

        client = OpenAIClient(model=builder.model_name)
    builder.llm(client)
    if context:
        builder.context(context)
    return llm_agent_class(
        builder.build(),
        settings.agent_id,
        description=settings.description,
        subscribe=settings.subscribe,
        output_topic=settings.output_topic,
        bus_tools=settings.bus_tools,
        schedules=settings.schedules,
    )
