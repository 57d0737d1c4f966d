"""Token estimation for budgets and scripted usage figures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from a2a_bus.llm.messages import LlmMessage


@runtime_checkable
class TokenEstimator(Protocol):
    """Estimates how many tokens messages cost in a prompt."""

    def estimate(self, messages: Sequence[LlmMessage]) -> int: ...


class HeuristicTokenEstimator:
    """About four characters per token plus a small per-message overhead.

    Good enough to keep a prompt under a budget without a tokenizer; plug in a
    real one (tiktoken, the model's own) for exact figures.
    """

    def __init__(self, chars_per_token: float = 4.0, per_message: int = 4) -> None:
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be > 0")
        self.chars_per_token = chars_per_token
        self.per_message = per_message

    def count_text(self, text: str) -> int:
        return int(len(text) / self.chars_per_token + 0.999) if text else 0

    def estimate_message(self, message: LlmMessage) -> int:
        chars = len(message.content or "")
        for call in message.tool_calls:
            chars += len(call.name) + len(call.arguments)
        return self.per_message + int(chars / self.chars_per_token + 0.999)

    def estimate(self, messages: Sequence[LlmMessage]) -> int:
        return sum(self.estimate_message(m) for m in messages)
