"""Conversation memory: what part of a conversation is kept and sent to the model.

Strategies (the agent DSL's forms): ``full()``, ``sliding_window(n)``, ``token_budget(n)``,
``summary(n)`` and ``custom(factory)``. Pruning never splits a tool round: a
tool message is only kept together with the assistant message that asked for
it, so the model never sees a tool result without its call.
"""

from __future__ import annotations

import abc
import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from a2a_bus.llm.client import LlmClient
from a2a_bus.llm.memory.tokens import HeuristicTokenEstimator, TokenEstimator
from a2a_bus.llm.messages import LlmMessage

#: ``name`` of the system message that carries the running summary.
SUMMARY_NAME = "conversation_summary"

Summarizer = Callable[[Sequence[LlmMessage]], str]


class ConversationMemory(abc.ABC):
    """One conversation's messages under a retention strategy."""

    def __init__(self, messages: Sequence[LlmMessage] = ()) -> None:
        self._messages: list[LlmMessage] = self.prune(list(messages))

    def add(self, *messages: LlmMessage) -> None:
        self._messages = self.prune([*self._messages, *messages])

    async def aadd(self, *messages: LlmMessage) -> None:
        """Add from async code (strategies that call out override this)."""
        self.add(*messages)

    def messages(self) -> list[LlmMessage]:
        """The retained messages, oldest first."""
        return list(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    @abc.abstractmethod
    def prune(self, messages: list[LlmMessage]) -> list[LlmMessage]:
        """Return the messages to keep out of ``messages``."""


MemoryFactory = Callable[[Sequence[LlmMessage]], ConversationMemory]


@dataclass(frozen=True, slots=True)
class MemoryStrategy:
    """A named factory of :class:`ConversationMemory` (what ``memory = ...`` picks)."""

    description: str
    factory: MemoryFactory
    #: "full", "sliding_window", "token_budget", "summary" or "custom".
    kind: str = "custom"
    size: int | None = None
    #: For "summary": the summarizer given, if any (the builder supplies an LLM one).
    summarizer: Summarizer | None = None

    def create(self, messages: Sequence[LlmMessage] = ()) -> ConversationMemory:
        return self.factory(messages)

    def __str__(self) -> str:
        return self.description


# -- pruning helpers -------------------------------------------------------


def split_system(messages: Sequence[LlmMessage]) -> tuple[list[LlmMessage], list[LlmMessage]]:
    system = [m for m in messages if m.role == "system"]
    rest = [m for m in messages if m.role != "system"]
    return system, rest


def drop_orphans(messages: list[LlmMessage]) -> list[LlmMessage]:
    """Drop leading tool messages (their assistant call was pruned)."""
    start = 0
    while start < len(messages) and messages[start].role == "tool":
        start += 1
    return messages[start:] if start else messages


def keep_last(rest: list[LlmMessage], n: int) -> list[LlmMessage]:
    """The last ``n`` messages, moved back to the start of a tool round if cut inside one."""
    start = max(0, len(rest) - n)
    while start > 0 and rest[start].role == "tool":
        start -= 1
    return drop_orphans(rest[start:])


def unit_starts(rest: Sequence[LlmMessage]) -> list[int]:
    """Indexes where a prunable unit begins (tool messages belong to the call before)."""
    return [i for i, m in enumerate(rest) if m.role != "tool"]


# -- strategies ------------------------------------------------------------


class FullMemory(ConversationMemory):
    """Keeps everything."""

    def prune(self, messages: list[LlmMessage]) -> list[LlmMessage]:
        return messages


class SlidingWindowMemory(ConversationMemory):
    """All system messages plus the last ``size`` other messages."""

    def __init__(self, messages: Sequence[LlmMessage] = (), size: int = 20) -> None:
        _check_positive("sliding_window size", size)
        self.size = size
        super().__init__(messages)

    def prune(self, messages: list[LlmMessage]) -> list[LlmMessage]:
        system, rest = split_system(messages)
        if len(rest) <= self.size and (not rest or rest[0].role != "tool"):
            return messages
        return system + keep_last(rest, self.size)


class TokenBudgetMemory(ConversationMemory):
    """Drops the oldest non-system messages until the estimate fits ``max_tokens``.

    The latest round is always kept, even when it alone is over budget: the
    model must see the message it is answering.
    """

    def __init__(
        self,
        messages: Sequence[LlmMessage] = (),
        max_tokens: int = 4000,
        estimator: TokenEstimator | None = None,
    ) -> None:
        _check_positive("token_budget max_tokens", max_tokens)
        self.max_tokens = max_tokens
        self.estimator = estimator or HeuristicTokenEstimator()
        super().__init__(messages)

    def prune(self, messages: list[LlmMessage]) -> list[LlmMessage]:
        system, rest = split_system(messages)
        rest = drop_orphans(rest)
        costs = [self.estimator.estimate([m]) for m in rest]
        total = self.estimator.estimate(system) + sum(costs)
        if total <= self.max_tokens:
            return system + rest
        starts = unit_starts(rest)
        start = 0
        for unit_start in starts[1:]:
            if total <= self.max_tokens:
                break
            total -= sum(costs[start:unit_start])
            start = unit_start
        return system + rest[start:]


class SummaryMemory(ConversationMemory):
    """Keeps the last ``keep`` messages verbatim and folds older ones into a summary.

    The summary is one system message (named ``conversation_summary``) that is
    updated each time older messages are folded in. Without a summarizer this
    degrades to a sliding window of ``keep`` messages.
    """

    def __init__(
        self,
        messages: Sequence[LlmMessage] = (),
        keep: int = 10,
        summarizer: Summarizer | None = None,
    ) -> None:
        _check_positive("summary size", keep)
        self.keep = keep
        self.summarizer = summarizer
        super().__init__(messages)

    def prune(self, messages: list[LlmMessage]) -> list[LlmMessage]:
        system, rest = split_system(messages)
        if len(rest) <= self.keep and (not rest or rest[0].role != "tool"):
            return messages
        kept = keep_last(rest, self.keep)
        if self.summarizer is None:
            return system + kept
        older = rest[: len(rest) - len(kept)]
        previous = [m for m in system if m.name == SUMMARY_NAME]
        others = [m for m in system if m.name != SUMMARY_NAME]
        text = self.summarizer([*previous, *older])
        summary = LlmMessage.system(
            f"Summary of the earlier conversation: {text}", name=SUMMARY_NAME
        )
        return [*others, summary, *kept]

    async def aadd(self, *messages: LlmMessage) -> None:
        if self.summarizer is None:
            self.add(*messages)
            return
        # The summarizer is usually a blocking LLM call: keep it off the event loop.
        await asyncio.to_thread(self.add, *messages)


def _check_positive(what: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{what} must be an integer >= 1, got {value!r}")


# -- the strategy factories (the memory = ... forms) ------------------------


def full() -> MemoryStrategy:
    """Keep every message (the default; costly in tokens on long conversations)."""
    return MemoryStrategy("full()", FullMemory, "full")


def sliding_window(size: int) -> MemoryStrategy:
    """Keep system messages plus the last ``size`` other messages."""
    _check_positive("sliding_window size", size)
    return MemoryStrategy(
        f"sliding_window({size})", lambda m: SlidingWindowMemory(m, size), "sliding_window", size
    )


def token_budget(max_tokens: int, estimator: TokenEstimator | None = None) -> MemoryStrategy:
    """Prune the oldest messages until the estimate is at most ``max_tokens``."""
    _check_positive("token_budget max_tokens", max_tokens)
    return MemoryStrategy(
        f"token_budget({max_tokens})",
        lambda m: TokenBudgetMemory(m, max_tokens, estimator),
        "token_budget",
        max_tokens,
    )


def summary(keep: int, summarizer: Summarizer | None = None) -> MemoryStrategy:
    """Keep the last ``keep`` messages and summarize older ones with ``summarizer``."""
    _check_positive("summary size", keep)
    return MemoryStrategy(
        f"summary({keep})",
        lambda m: SummaryMemory(m, keep, summarizer),
        "summary",
        keep,
        summarizer,
    )


def custom(factory: MemoryFactory, description: str = "custom") -> MemoryStrategy:
    """Any ``ConversationMemory`` made by ``factory(initial_messages)``."""
    return MemoryStrategy(description, factory)


_SPEC = re.compile(r"^\s*(\w+)\s*(?:\(\s*(\d*)\s*\))?\s*$")
_SIZED: dict[str, Callable[[int], MemoryStrategy]] = {
    "sliding_window": sliding_window,
    "token_budget": token_budget,
    "summary": summary,
}


def parse_memory(spec: str | Mapping[str, Any]) -> MemoryStrategy:
    """A strategy from its DSL form: ``"sliding_window(20)"``, ``"full()"``,
    ``{"strategy": "token_budget", "size": 4000}`` or ``{"summary": 10}``.
    """
    if isinstance(spec, Mapping):
        if "strategy" in spec:
            unknown = set(spec) - {"strategy", "size"}
            if unknown:
                raise ValueError(
                    f"unknown memory option(s) {sorted(unknown)}; use strategy and size"
                )
            name, size = spec["strategy"], spec.get("size")
        elif len(spec) == 1:
            name, size = next(iter(spec.items()))
        else:
            raise ValueError("memory mapping needs 'strategy' (and 'size'), e.g. {strategy: full}")
    elif isinstance(spec, str):
        match = _SPEC.match(spec)
        if not match:
            raise ValueError(f"cannot read memory strategy {spec!r}; e.g. sliding_window(20)")
        name, size = match.group(1), int(match.group(2)) if match.group(2) else None
    else:
        raise ValueError(f"memory must be a string or a mapping, got {type(spec).__name__}")
    if not isinstance(name, str):
        raise ValueError(
            f"a memory strategy must be a name such as sliding_window, got {type(name).__name__}"
        )
    if name == "full":
        if size is not None:
            raise ValueError("full() takes no size")
        return full()
    if name not in _SIZED:
        raise ValueError(
            f"unknown memory strategy {name!r}; use full, sliding_window, token_budget or summary"
        )
    if size is None:
        raise ValueError(f"{name} needs a size, e.g. {name}(20)")
    return _SIZED[name](size)


DEFAULT_SUMMARY_PROMPT = (
    "Summarize the conversation below for your own later reference. Keep facts, decisions, "
    "names, numbers and open questions; drop pleasantries. Answer with the summary only."
)


def llm_summarizer(
    client: LlmClient, *, model: str | None = None, instructions: str = DEFAULT_SUMMARY_PROMPT
) -> Summarizer:
    """A summarizer that asks ``client`` (usually the agent's own model)."""

    def summarize(messages: Sequence[LlmMessage]) -> str:
        transcript = "\n".join(_transcript_line(m) for m in messages)
        response = client.chat(
            [LlmMessage.system(instructions), LlmMessage.user(transcript)], model=model
        )
        return response.content.strip()

    return summarize


def _transcript_line(message: LlmMessage) -> str:
    if message.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        return f"{message.role}: {message.content or ''} [calls {calls}]".strip()
    label = f"tool {message.name}" if message.role == "tool" and message.name else message.role
    return f"{label}: {message.content or ''}"
