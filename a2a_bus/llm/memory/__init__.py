"""Conversation memory: strategies (what is kept), stores (where) and notes tools."""

from a2a_bus.llm.memory.notes import InMemoryNotes, NotesBackend, SqliteNotes
from a2a_bus.llm.memory.redis_store import RedisStore
from a2a_bus.llm.memory.sqlite_store import SqliteStore
from a2a_bus.llm.memory.store_urls import open_store
from a2a_bus.llm.memory.stores import ConversationStore, InMemoryStore, StoreError
from a2a_bus.llm.memory.strategies import (
    SUMMARY_NAME,
    ConversationMemory,
    FullMemory,
    MemoryStrategy,
    SlidingWindowMemory,
    Summarizer,
    SummaryMemory,
    TokenBudgetMemory,
    custom,
    full,
    llm_summarizer,
    parse_memory,
    sliding_window,
    summary,
    token_budget,
)
from a2a_bus.llm.memory.tokens import HeuristicTokenEstimator, TokenEstimator

__all__ = [
    "SUMMARY_NAME",
    "ConversationMemory",
    "ConversationStore",
    "FullMemory",
    "HeuristicTokenEstimator",
    "InMemoryNotes",
    "InMemoryStore",
    "MemoryStrategy",
    "NotesBackend",
    "RedisStore",
    "SlidingWindowMemory",
    "SqliteNotes",
    "SqliteStore",
    "StoreError",
    "Summarizer",
    "SummaryMemory",
    "TokenBudgetMemory",
    "TokenEstimator",
    "custom",
    "full",
    "llm_summarizer",
    "open_store",
    "parse_memory",
    "sliding_window",
    "summary",
    "token_budget",
]
