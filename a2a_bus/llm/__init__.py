"""The LLM agent runtime: client SPI, tools, the bounded tool loop, memory, builder.

Transport-free: an :class:`AgentLoop` runs anywhere; the bus hosts it as an actor.
"""

from a2a_bus.llm import memory
from a2a_bus.llm.builder import AgentBuilder, load_agent_file
from a2a_bus.llm.bus_agent import LlmAgent, agent_class_from_file, llm_agent_class
from a2a_bus.llm.bus_tools import call_agent, publish, read_topic
from a2a_bus.llm.checkpoint import AgentCheckpoint
from a2a_bus.llm.chunks import AgentStreamChunk, Done, Token, ToolEnd, ToolStart
from a2a_bus.llm.client import LlmClient, StreamItem
from a2a_bus.llm.dispatch import ToolResult
from a2a_bus.llm.errors import (
    AgentConfigError,
    AgentFileError,
    ExitConditionError,
    LlmError,
    MaxTurnsExceeded,
)
from a2a_bus.llm.exit import ExitCondition
from a2a_bus.llm.listeners import (
    AgentListener,
    CallbackContext,
    LlmCalled,
    LoopExited,
    ToolCompleted,
    ToolDispatched,
    TurnStarted,
)
from a2a_bus.llm.loop import AgentLoop
from a2a_bus.llm.memory import (
    ConversationMemory,
    ConversationStore,
    InMemoryNotes,
    InMemoryStore,
    RedisStore,
    SqliteNotes,
    SqliteStore,
)
from a2a_bus.llm.messages import ChatResponse, LlmMessage, ToolCall, ToolDefinition, Usage
from a2a_bus.llm.openai_client import OpenAIClient
from a2a_bus.llm.output import AgentOutput
from a2a_bus.llm.scripted import ScriptedClient
from a2a_bus.llm.soul import FileSoul, NoSoul, SoulProvider, StaticSoul
from a2a_bus.llm.tools import AgentTool, FunctionTool, ToolContext, ToolRegistry, tool

__all__ = [
    "AgentBuilder",
    "AgentCheckpoint",
    "AgentConfigError",
    "AgentFileError",
    "AgentListener",
    "AgentLoop",
    "AgentOutput",
    "AgentStreamChunk",
    "AgentTool",
    "CallbackContext",
    "ChatResponse",
    "ConversationMemory",
    "ConversationStore",
    "Done",
    "ExitCondition",
    "ExitConditionError",
    "FileSoul",
    "FunctionTool",
    "InMemoryNotes",
    "InMemoryStore",
    "LlmAgent",
    "LlmCalled",
    "LlmClient",
    "LlmError",
    "LlmMessage",
    "LoopExited",
    "MaxTurnsExceeded",
    "NoSoul",
    "OpenAIClient",
    "RedisStore",
    "ScriptedClient",
    "SoulProvider",
    "SqliteNotes",
    "SqliteStore",
    "StaticSoul",
    "StreamItem",
    "Token",
    "ToolCall",
    "ToolCompleted",
    "ToolContext",
    "ToolDefinition",
    "ToolDispatched",
    "ToolEnd",
    "ToolRegistry",
    "ToolResult",
    "ToolStart",
    "TurnStarted",
    "Usage",
    "agent_class_from_file",
    "call_agent",
    "llm_agent_class",
    "load_agent_file",
    "memory",
    "publish",
    "read_topic",
    "tool",
]
