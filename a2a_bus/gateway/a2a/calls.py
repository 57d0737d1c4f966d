"""Which bus method an A2A message calls, with which params, and how answers read.

* A data part ``{"method": ..., "params": ...}`` (or a text part that is JSON of
  that shape) calls that method of the agent; such a message has no other part.
* Other text (or a data part without ``method``) goes to the agent's
  conversational method: ``message``, ``chat`` or ``echo``, the first it has; a
  stream request prefers its ``<name>/stream`` variant. The text fills the
  method's first parameter and the A2A ``contextId`` its session parameter, so
  an LLM agent keeps one conversation per context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from a2a_bus.gateway.a2a.errors import invalid_params
from a2a_bus.gateway.a2a.model import Message, Part
from a2a_bus.protocol import ROUTING_PARAMS, ErrorCode, ProtocolError, parse_json

#: Methods that take plain text, in order of preference.
CONVERSATIONAL = ("message", "chat", "echo")
#: Parameter names that receive the A2A context id.
SESSION_PARAMS = ("session_id", "sessionId", "context_id", "contextId")
STREAM_SUFFIX = "/stream"


@dataclass(frozen=True)
class Call:
    method: str
    params: Any
    #: The method yields a response stream.
    streaming: bool
    #: A conversational method (its stream chunks are the LLM runtime's).
    conversational: bool

    def record(self) -> dict[str, Any]:
        """As the task log records it (:meth:`CallPlan.of` reads it back)."""
        return CallPlan(self.method, self.streaming, self.conversational).record()


@dataclass(frozen=True)
class CallPlan:
    """The bus call of one turn, as the task log records it: a :class:`Call` less
    its params (which went to the agent in the request)."""

    method: str
    streaming: bool
    #: A conversational method (its stream chunks are the LLM runtime's).
    conversational: bool

    @classmethod
    def of(cls, record: dict[str, Any]) -> CallPlan:
        return cls(str(record["method"]), bool(record["streaming"]), bool(record["conversational"]))

    def record(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "streaming": self.streaming,
            "conversational": self.conversational,
        }


def _methods(card: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(m.get("name")): m for m in card.get("methods", ()) if isinstance(m, dict)}


def _either(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1]


def params_schema(entry: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a method's params (empty when the card has none)."""
    schema = entry.get("params")
    return schema if isinstance(schema, dict) else {}


def offered(card: dict[str, Any]) -> str:
    return ", ".join(_methods(card)) or "no methods"


def streams(entry: dict[str, Any]) -> bool:
    return entry.get("streaming") == "response"


def _explicit(value: Any) -> tuple[str, Any] | None:
    """``(method, params)`` when ``value`` is ``{"method": str, "params"?: ...}``."""
    if (
        isinstance(value, dict)
        and isinstance(value.get("method"), str)
        and value.keys() <= {"method", "params"}
    ):
        return value["method"], value.get("params")
    return None


def _json_call(text: str) -> tuple[str, Any] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    body = stripped.encode()
    try:
        return _explicit(parse_json(body))
    except ProtocolError as exc:
        # Not JSON, or JSON text that calls nothing: the agent gets it as text. A call
        # with an integer the bus cannot carry (orjson reads it as another number) is refused.
        if exc.failure.code == ErrorCode.PARSE_ERROR or _explicit(orjson.loads(body)) is None:
            return None
        raise invalid_params(str(exc.failure.data)) from None


def _calls(message: Message) -> list[tuple[str, Any]]:
    texts = (p.value for p in message.parts if p.kind == "text")
    data = (p.value for p in message.parts if p.kind == "data")
    return [c for c in (*map(_explicit, data), *map(_json_call, texts)) if c is not None]


def called_method(message: Message) -> str | None:
    """The method a message calls explicitly (by a data part or JSON text), if any."""
    calls = _calls(message)
    return calls[0][0] if calls else None


def plan(card: dict[str, Any], message: Message, context_id: str, *, stream: bool) -> Call:
    """The call ``message`` makes on the agent of ``card``; InvalidParams otherwise."""
    agent = str(card.get("id"))
    texts = [p.value for p in message.parts if p.kind == "text"]
    data = [p.value for p in message.parts if p.kind == "data"]
    calls = _calls(message)
    if len(calls) > 1:
        raise invalid_params("a message may call one method; it calls several", agent=agent)
    if calls:
        if len(message.parts) > 1:  # the others would go nowhere
            others = len(message.parts) - 1
            raise invalid_params(
                f"a message that calls a method carries only that call; this one has "
                f"{others} other part{'s' if others > 1 else ''}",
                agent=agent,
            )
        return _explicit_call(card, *calls[0])
    if texts:
        value: Any = "\n".join(texts)
    elif len(data) == 1:
        value = data[0]
    else:
        raise invalid_params("a message needs text, or one data part", agent=agent)
    return _conversation(card, value, context_id, stream=stream)


def _explicit_call(card: dict[str, Any], method: str, params: Any) -> Call:
    agent = str(card.get("id"))
    entry = _methods(card).get(method)
    if entry is None:
        raise invalid_params(
            f"agent {agent!r} has no method {method!r}; it offers: {offered(card)}",
            agent=agent,
            method=method,
            methods=offered(card),
        )
    if entry.get("streaming") == "request":
        raise invalid_params(
            f"{method!r} takes a stream of input, which one A2A message cannot carry",
            agent=agent,
            method=method,
        )
    if params is not None and not isinstance(params, dict | list):
        raise invalid_params("params must be an object or an array", method=method)
    if isinstance(params, dict) and ROUTING_PARAMS & params.keys():
        names = ", ".join(sorted(ROUTING_PARAMS & params.keys()))
        raise invalid_params(f"routing parameters ({names}) are not accepted here", method=method)
    return Call(method, params, streams(entry), conversational=False)


def _conversation(card: dict[str, Any], value: Any, context_id: str, *, stream: bool) -> Call:
    methods = _methods(card)
    name = next((n for n in CONVERSATIONAL if n in methods), None)
    if name is None:
        agent = str(card.get("id"))
        raise invalid_params(
            f"agent {agent!r} takes no plain messages (it has no {_either(CONVERSATIONAL)} "
            'method); send a data part {"method": ..., "params": ...} calling one of: '
            f"{offered(card)}",
            agent=agent,
            methods=offered(card),
        )
    variant = methods.get(name + STREAM_SUFFIX)
    if stream and variant is not None and streams(variant):
        name = name + STREAM_SUFFIX
    entry = methods[name]
    return Call(name, _params(entry, value, context_id), streams(entry), conversational=True)


def _params(entry: dict[str, Any], value: Any, context_id: str) -> Any:
    schema = params_schema(entry)
    properties = schema.get("properties") or {}
    session = next((p for p in SESSION_PARAMS if p in properties), None)
    names = [p for p in schema.get("required") or () if p != session]
    names = names or [p for p in properties if p != session]
    if not names:
        return [value]  # a method of positional (*args) parameters
    target = names[0]
    if properties.get(target, {}).get("type") == "string" and not isinstance(value, str):
        value = orjson.dumps(value).decode()
    params = {target: value}
    if session is not None:
        params[session] = context_id
    return params


def answer_parts(value: Any) -> list[Part]:
    """A method's result as parts: a string as text, anything else as data."""
    return [Part.of(value)]


def error_parts(error: dict[str, Any]) -> list[Part]:
    """A JSON-RPC error object as a failed task's status message."""
    text = str(error.get("message") or "Error")
    detail = error.get("data")
    if isinstance(detail, str) and detail:
        text = f"{text}: {detail}"
    return [Part.text(f"{text} (error {error.get('code')})"), Part.data(error)]


#: Chunks of the LLM runtime's ``chat/stream`` (see ``a2a_bus.llm.chunks``).
_TOKEN, _DONE = "token", "done"
_PROGRESS = ("tool_start", "tool_end")


def is_progress(item: Any) -> bool:
    """Whether a stream item reports a tool call's progress rather than answering."""
    return isinstance(item, dict) and item.get("type") in _PROGRESS


def chunk_parts(item: Any, conversational: bool, started: bool) -> list[Part]:
    """The parts one stream item adds to the answer."""
    if conversational and isinstance(item, dict):
        kind = item.get("type")
        if kind == _TOKEN and isinstance(item.get("text"), str):
            return [Part.text(item["text"])] if item["text"] else []
        if kind == _DONE:
            content = item.get("content")
            # The tokens already carried the answer; a run that streamed none has it here.
            return [Part.text(content)] if isinstance(content, str) and not started else []
    return answer_parts(item)
