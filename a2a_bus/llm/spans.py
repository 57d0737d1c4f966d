"""OpenTelemetry spans of an agent run, after the GenAI semantic conventions.

One ``invoke_agent`` span per run, and within it a ``chat`` span per model call
(model, token usage, finish reason) and an ``execute_tool`` span per tool call,
current while the tool runs (a bus call it makes is its child). The tracer is
the bus's when a bus handler runs the agent, else the global provider's: without
an OpenTelemetry SDK every span is a no-op.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opentelemetry.trace import Span

from a2a_bus.llm.messages import ChatResponse, ToolCall, Usage
from a2a_bus.runtime import tracing

GEN_AI_OPERATION = "gen_ai.operation.name"


def start_run(agent: str, model: str, conversation: str | None) -> Span:
    """The span of one run of ``agent`` (a child of the span current here)."""
    attributes = {
        GEN_AI_OPERATION: "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.request.model": model,
    }
    if conversation is not None:
        attributes["gen_ai.conversation.id"] = conversation
    return tracing.tracer_here().start_span(
        f"invoke_agent {agent}", kind=tracing.SpanKind.INTERNAL, attributes=attributes
    )


def end_run(span: Span, usage: Usage, error: BaseException | None) -> None:
    span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
    if error is not None:
        tracing.record_exception(span, error)
    span.end()


@contextlib.contextmanager
def model_call(run: Span, model: str) -> Iterator[list[ChatResponse]]:
    """A ``chat`` span, a child of ``run``, around one model call: append the
    response to the yielded list for its usage and finish reason."""
    span = tracing.tracer_here().start_span(
        f"chat {model}",
        context=tracing.context_with(run),
        kind=tracing.SpanKind.CLIENT,
        attributes={GEN_AI_OPERATION: "chat", "gen_ai.request.model": model},
    )
    answered: list[ChatResponse] = []
    with tracing.ending(span):
        yield answered
        if answered:
            response = answered[-1]
            span.set_attribute("gen_ai.response.model", response.model or model)
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.completion_tokens)
            span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])


def tool_call(run: Span, call: ToolCall, known: bool) -> Span:
    """An ``execute_tool`` span, a child of ``run``; make it current while the tool runs.

    Named after the tool when ``known`` (registered): a model may call tools it makes
    up, and span names stay a bounded set."""
    return tracing.tracer_here().start_span(
        f"execute_tool {call.name}" if known else "execute_tool",
        context=tracing.context_with(run),
        kind=tracing.SpanKind.INTERNAL,
        attributes={
            GEN_AI_OPERATION: "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
        },
    )


def tool_failed(span: Span, error: str) -> None:
    """The tool's failure (reported to the model, not raised) marks its span."""
    span.set_attribute("error.type", "tool_error")
    span.set_status(tracing.Status(tracing.StatusCode.ERROR, error))
