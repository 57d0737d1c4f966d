"""Errors raised by the LLM runtime."""

from __future__ import annotations

from a2a_bus.llm.checkpoint import AgentCheckpoint


class LlmError(Exception):
    """An LLM backend call failed (after retries, when the error was transient)."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class AgentConfigError(ValueError):
    """An agent was configured with an invalid value (caught at build time)."""


class ExitConditionError(AgentConfigError):
    """An ``exit_condition`` expression is invalid."""


class MaxTurnsExceeded(Exception):
    """The loop used ``max_turns`` turns without a final answer.

    ``checkpoint`` holds the conversation so far; pass it to ``AgentLoop.resume``
    to continue with a fresh turn budget.
    """

    def __init__(self, max_turns: int, checkpoint: AgentCheckpoint) -> None:
        super().__init__(f"agent loop exceeded max_turns={max_turns} without a final answer")
        self.max_turns = max_turns
        self.checkpoint = checkpoint


class AgentFileError(AgentConfigError):
    """An agent file is invalid; the message names the file, line and key."""

    def __init__(self, file: str, line: int | None, key: str, problem: str) -> None:
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {key}: {problem}" if key else f"{where}: {problem}")
        self.file = file
        self.line = line
        self.key = key
        self.problem = problem
