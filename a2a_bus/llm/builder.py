"""``AgentBuilder``: assemble an :class:`AgentLoop`; only the LLM is required.

Defaults: no system prompt, ``full()`` memory in an in-memory store, no tools,
``max_turns=10``, unlimited tool concurrency. Components that expose tools (a
notes backend's ``memory_save``/``memory_read``/...) have them merged in
automatically.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from a2a_bus.llm.agent_file import BusSettings, fill_from_file
from a2a_bus.llm.client import LlmClient
from a2a_bus.llm.errors import AgentConfigError
from a2a_bus.llm.exit import ExitCondition
from a2a_bus.llm.listeners import AgentListener
from a2a_bus.llm.loop import AgentLoop
from a2a_bus.llm.mcp_servers import McpServer
from a2a_bus.llm.memory.store_urls import open_store
from a2a_bus.llm.memory.stores import ConversationStore
from a2a_bus.llm.memory.strategies import MemoryStrategy, llm_summarizer, parse_memory, summary
from a2a_bus.llm.openai_client import OpenAIClient
from a2a_bus.llm.soul import FileSoul, SoulProvider, as_soul
from a2a_bus.llm.tools import AgentTool, FunctionTool


@runtime_checkable
class ToolProvider(Protocol):
    """A component that brings its own tools (merged by the builder)."""

    def exposes_tools(self) -> list[AgentTool]: ...


class AgentBuilder:
    """Fluent configuration of one agent; ``build()`` makes the loop."""

    def __init__(self, name: str = "agent") -> None:
        self._name = name
        self._client: LlmClient | None = None
        self._model: str | None = None
        self._soul: SoulProvider | None = None
        self._max_turns = 10
        self._max_tool_concurrency: int | None = None
        self._temperature: float | None = None
        self._memory: MemoryStrategy | None = None
        self._store: ConversationStore | None = None
        self._tools: list[AgentTool] = []
        self._providers: list[ToolProvider] = []
        self._exit_condition: ExitCondition | None = None
        self._listeners: list[AgentListener] = []
        self._context: dict[str, Any] = {}
        self._tool_timeout: float | None = None
        self._streaming = False
        self._mcp_servers: list[McpServer] = []

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> AgentBuilder:
        """A builder pre-filled from an agent file (YAML or TOML); add the LLM and build."""
        return parse_agent_file(path)[0]

    # -- components ------------------------------------------------------------

    def llm(self, client: LlmClient) -> AgentBuilder:
        """The chat backend (required)."""
        if not isinstance(client, LlmClient):
            raise AgentConfigError(f"llm() needs an LlmClient, got {type(client).__name__}")
        self._client = client
        return self

    def name(self, name: str) -> AgentBuilder:
        self._name = name
        return self

    def model(self, model: str) -> AgentBuilder:
        """Model id passed to the client (default: the client's own)."""
        self._model = model
        return self

    def system_prompt(self, prompt: str | SoulProvider | None) -> AgentBuilder:
        """The soul: a fixed text or any provider (``FileSoul``, a custom one); a text
        over ``MAX_SYSTEM_PROMPT_BYTES`` is refused here (``AgentConfigError``)."""
        self._soul = as_soul(prompt)
        return self

    def system_prompt_file(self, path: str | os.PathLike[str]) -> AgentBuilder:
        """A system prompt kept in a file, re-read when it changes."""
        self._soul = FileSoul(path)
        return self

    def max_turns(self, turns: int) -> AgentBuilder:
        self._max_turns = turns
        return self

    def max_tool_concurrency(self, limit: int | None) -> AgentBuilder:
        self._max_tool_concurrency = limit
        return self

    def temperature(self, temperature: float | None) -> AgentBuilder:
        self._temperature = temperature
        return self

    def memory(self, strategy: MemoryStrategy | str | Mapping[str, Any]) -> AgentBuilder:
        """A memory strategy, or its DSL form such as ``"sliding_window(20)"``."""
        if not isinstance(strategy, MemoryStrategy):
            try:
                strategy = parse_memory(strategy)
            except ValueError as exc:
                raise AgentConfigError(str(exc)) from None
        self._memory = strategy
        return self

    def store(self, store: ConversationStore | str) -> AgentBuilder:
        """Where conversations live: a store, or a URL (``sqlite:///agent.db``, ``redis://``)."""
        if isinstance(store, str):
            try:
                store = open_store(store)
            except ValueError as exc:
                raise AgentConfigError(str(exc)) from None
        self._store = store
        if isinstance(store, ToolProvider):
            self._providers.append(store)
        return self

    def durable(self, path: str | os.PathLike[str] = "a2a-conversations.db") -> AgentBuilder:
        """Keep conversations across restarts in an embedded SQLite file."""
        from a2a_bus.llm.memory.sqlite_store import SqliteStore

        return self.store(SqliteStore(path))

    def memory_backend(self, backend: ToolProvider) -> AgentBuilder:
        """A backend that exposes its own tools (e.g. ``InMemoryNotes``); they are merged."""
        if not isinstance(backend, ToolProvider):
            raise AgentConfigError(f"{backend!r} does not expose tools (no exposes_tools())")
        self._providers.append(backend)
        return self

    def tool(
        self,
        item: AgentTool | Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> AgentBuilder:
        """Add a tool, or a typed function to wrap as one."""
        if isinstance(item, AgentTool):
            if name is not None or description is not None:
                raise AgentConfigError("name/description apply to functions, not AgentTool objects")
            self._tools.append(item)
        else:
            self._tools.append(FunctionTool(item, name=name, description=description))
        return self

    def tools(self, items: Iterable[AgentTool | Callable[..., Any]]) -> AgentBuilder:
        for item in items:
            self.tool(item)
        return self

    def mcp_server(self, server: McpServer) -> AgentBuilder:
        """Mount an MCP server: its tools join the agent's as ``<server>__<tool>``
        (``McpServer.stdio("files", "python", "files.py")``, ``McpServer.http(...)``)."""
        if not isinstance(server, McpServer):
            raise AgentConfigError(f"mcp_server() needs an McpServer, got {type(server).__name__}")
        if any(known.name == server.name for known in self._mcp_servers):
            raise AgentConfigError(f"two MCP servers are named {server.name!r}")
        self._mcp_servers.append(server)
        return self

    def exit_condition(self, expression: str | ExitCondition | None) -> AgentBuilder:
        """Checked after each tool round; compiled now, so a bad one fails here."""
        if isinstance(expression, str):
            expression = ExitCondition(expression)
        self._exit_condition = expression
        return self

    def streaming(self, enabled: bool = True) -> AgentBuilder:
        self._streaming = enabled
        return self

    def listener(self, listener: AgentListener) -> AgentBuilder:
        self._listeners.append(listener)
        return self

    def context(self, values: Mapping[str, Any]) -> AgentBuilder:
        """Values tools can use (``ctx.<name>`` in agent files, ``ToolContext.context``)."""
        self._context.update(values)
        return self

    def tool_timeout(self, seconds: float | None) -> AgentBuilder:
        self._tool_timeout = seconds
        return self

    # -- build -----------------------------------------------------------------

    def build(self) -> AgentLoop:
        if self._client is None:
            raise AgentConfigError("an agent needs an LLM: call .llm(client) before .build()")
        memory = self._memory
        if memory is not None and memory.kind == "summary" and memory.summarizer is None:
            # summary(n) from a file or the DSL: summarize with the agent's own model.
            assert memory.size is not None
            memory = summary(memory.size, llm_summarizer(self._client, model=self._model))
        tools = list(self._tools)
        for provider in self._providers:
            tools.extend(provider.exposes_tools())
        seen: set[str] = set()
        for agent_tool in tools:
            if agent_tool.name in seen:
                raise AgentConfigError(f"two tools are named {agent_tool.name!r}")
            seen.add(agent_tool.name)
        return AgentLoop(
            self._client,
            tools=tools,
            name=self._name,
            model=self._model,
            system_prompt=self._soul,
            max_turns=self._max_turns,
            max_tool_concurrency=self._max_tool_concurrency,
            temperature=self._temperature,
            memory=memory,
            store=self._store,
            exit_condition=self._exit_condition,
            listeners=self._listeners,
            context=self._context,
            tool_timeout=self._tool_timeout,
            streaming=self._streaming,
            mcp_servers=self._mcp_servers,
        )

    @property
    def agent_name(self) -> str:
        return self._name

    @property
    def model_name(self) -> str | None:
        return self._model


def parse_agent_file(path: str | os.PathLike[str]) -> tuple[AgentBuilder, BusSettings]:
    """Parse and validate an agent file: a builder filled from it, and its bus settings."""
    builder = AgentBuilder()
    settings = fill_from_file(builder, path)
    return builder, settings


def load_agent_file(
    path: str | os.PathLike[str],
    *,
    client: LlmClient | None = None,
    context: Mapping[str, Any] | None = None,
) -> AgentLoop:
    """Build the agent an agent file describes.

    Without ``client``, an :class:`~a2a_bus.llm.openai_client.OpenAIClient`
    configured from the environment serves the file's model.
    """
    builder = AgentBuilder.from_file(path)
    builder.llm(client if client is not None else OpenAIClient(model=builder.model_name))
    if context:
        builder.context(context)
    return builder.build()
