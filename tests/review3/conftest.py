"""Fixtures of the LLM tests reused here: the scripted OpenAI-compatible server."""

from __future__ import annotations

from llm.conftest import _scripted_server, llm_server

__all__ = ["_scripted_server", "llm_server"]
