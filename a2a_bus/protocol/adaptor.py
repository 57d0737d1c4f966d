"""The A2A protocol adaptor: JSON-RPC 2.0 <-> CloudEvents, and detection of what arrived.

The mapping is the one in protocol/PROTOCOL.md (wire-compatible with the Apache
EventMesh A2A adaptor). Conversion is total: every input element yields either a
CloudEvent or a :class:`Failure` holding the JSON-RPC error to answer with. The
CloudEvents a body's content type or headers announce are read by
:mod:`a2a_bus.protocol.detection`.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol.constants import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_SOURCE,
    DEFAULT_TYPE_PREFIX,
    PROTOCOL_NAME,
    REQUEST_SUFFIX,
    RESPONSE_TYPE_SUFFIX,
    SPECVERSION,
    STREAM_METHOD,
    STREAM_SUFFIX,
    ext,
    mcptype,
    params_key,
)
from a2a_bus.protocol.constants import content_type as media_types
from a2a_bus.protocol.detection import Converted, Headers, announced_events, batch_too_long
from a2a_bus.protocol.errors import ErrorCode, Failure, JsonRpcId, ProtocolError
from a2a_bus.protocol.events import adopt_event, new_event, new_id
from a2a_bus.protocol.formats import from_structured
from a2a_bus.protocol.jsonrpc import Kind, classify, jsonrpc_of
from a2a_bus.protocol.kinds import event_kind
from a2a_bus.protocol.parsing import parse_json
from a2a_bus.protocol.tracecontext import propagated_traceparent

# Routing members of params and the attribute each is promoted to.
_ROUTING: tuple[tuple[str, str], ...] = (
    (params_key.AGENT, ext.TARGET_AGENT),
    (params_key.TOPIC, ext.SUBJECT),
    (params_key.SEQ, ext.SEQ),
    (params_key.SESSION, ext.SESSION),
)


_ROUTING_MEMBERS = frozenset(member for member, _ in _ROUTING)

# A member read off its enum class goes through the metaclass's __getattr__ hook
# (about 0.1 us on Python 3.11): the paths every message takes use these.
_REQUEST, _RESPONSE = Kind.REQUEST, Kind.RESPONSE


def _routing_failure(name: str, id: JsonRpcId) -> Failure:
    want = "a non-negative integer" if name == params_key.SEQ else "a non-empty string"
    return Failure(ErrorCode.INVALID_PARAMS, "Invalid params", id, f"params.{name} must be {want}")


class Adaptor:
    """Converts between JSON-RPC 2.0 messages and CloudEvents.

    ``prefix`` starts every event type; ``source`` is the ``source`` attribute of the
    events it creates. ``max_message_bytes`` and ``max_batch`` bound what one call
    accepts; larger input is answered with an Invalid Request error, not parsed.
    """

    def __init__(
        self,
        prefix: str = DEFAULT_TYPE_PREFIX,
        source: str = DEFAULT_SOURCE,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_batch: int = DEFAULT_MAX_BATCH,
    ) -> None:
        self.prefix = prefix
        self.source = source
        self.max_message_bytes = max_message_bytes
        self.max_batch = max_batch
        self.response_type = prefix + RESPONSE_TYPE_SUFFIX
        self._request_types: dict[str, str] = {}
        self._notification_types: dict[str, str] = {}
        #: The attributes every event of a method shares, by method: an event's are
        #: a copy with its id filled in (copying costs less than building them).
        self._request_heads: dict[str, dict[str, Any]] = {}
        self._notification_heads: dict[str, dict[str, Any]] = {}

    # -- detection ------------------------------------------------------------------

    def from_bytes(
        self, body: bytes, content_type: str | None = None, headers: Headers | None = None
    ) -> list[Converted]:
        """Detect what ``body`` is and convert it; never raises.

        JSON-RPC (single or batch), a structured CloudEvent, a CloudEvents batch, or
        a binary-mode CloudEvent (``ce-``/``ce_`` headers beside the body).
        """
        if len(body) > self.max_message_bytes:
            return [self._too_large(len(body))]
        if content_type is not None or headers:
            events = announced_events(body, content_type, headers, self.max_batch)
            if events is not None:
                return events
        # JSON-RPC, or JSON that says itself what it is (section 1 of PROTOCOL.md)
        try:
            message = parse_json(body)
        except ProtocolError as exc:
            return [exc.failure]
        return self.from_json(message)

    def from_json(self, message: Any) -> list[Converted]:
        """Convert an already parsed JSON value (object or array)."""
        if type(message) is list:
            if not message:
                return [Failure(ErrorCode.INVALID_REQUEST, "Invalid Request", None, "empty batch")]
            if len(message) > self.max_batch:
                return [batch_too_long(len(message), self.max_batch)]
            return [self._one(item) for item in message]
        return [self._one(message)]

    def _one(self, item: Any) -> Converted:
        if type(item) is dict and "specversion" in item and "jsonrpc" not in item:
            try:
                return from_structured(item)
            except ProtocolError as exc:
                return exc.failure
        kind = classify(item)
        if isinstance(kind, Failure):
            return kind
        return self.event_from_message(item, kind)

    def _too_large(self, size: int) -> Failure:
        detail = f"message is {size} bytes; the limit is {self.max_message_bytes}"
        return Failure(ErrorCode.INVALID_REQUEST, "Invalid Request", None, detail)

    # -- JSON-RPC -> CloudEvent -----------------------------------------------------

    def event_type(self, method: str, kind: Kind) -> str:
        """``<prefix>.<method with / as .>`` plus ``.req``/``.stream`` for requests."""
        if kind is Kind.RESPONSE:
            return self.response_type
        cache = self._request_types if kind is Kind.REQUEST else self._notification_types
        cached = cache.get(method)
        if cached is None:
            cached = f"{self.prefix}.{method.replace('/', '.')}"
            if kind is Kind.REQUEST:
                cached += STREAM_SUFFIX if method == STREAM_METHOD else REQUEST_SUFFIX
            if len(cache) < 4096:  # bounded: method names come from the outside
                cache[method] = cached
        return cached

    def event_from_message(self, message: dict[str, Any], kind: Kind) -> Converted:
        """Map one valid JSON-RPC message (already classified) to its event."""
        if kind is _RESPONSE:
            return self._response_from_message(message)
        method: str = message["method"]
        request = kind is _REQUEST
        # The cache is read here first: every message sent is mapped.
        head = (self._request_heads if request else self._notification_heads).get(method)
        if head is None:
            head = self._head(method, kind)
        attributes = head.copy()
        if request:
            id = message["id"]
            # An event id must be a non-empty string; null and "" ids get a fresh one.
            attributes["id"] = str(id) if id is not None and id != "" else new_id()
        else:
            attributes["id"] = new_id()
        params = message.get("params")
        if type(params) is dict and not _ROUTING_MEMBERS.isdisjoint(params):
            for member, attribute in _ROUTING:
                if member in params:
                    value = params[member]
                    if member == params_key.SEQ:
                        if type(value) is not int or value < 0:
                            return _routing_failure(member, message.get("id"))
                    elif type(value) is not str or not value:
                        return _routing_failure(member, message.get("id"))
                    attributes[attribute] = value
        return adopt_event(attributes, message)

    def _head(self, method: str, kind: Kind) -> dict[str, Any]:
        """The attributes the events of ``method`` share (the id a placeholder, kept
        in its place), cached like the event type."""
        request = kind is _REQUEST
        head: dict[str, Any] = {
            "specversion": SPECVERSION,
            "id": "",
            "source": self.source,
            "type": self.event_type(method, kind),
            "datacontenttype": media_types.JSON,
            ext.PROTOCOL: PROTOCOL_NAME,
            ext.METHOD: method,
            ext.MCPTYPE: mcptype.REQUEST if request else mcptype.NOTIFICATION,
        }
        cache = self._request_heads if request else self._notification_heads
        if len(cache) < 4096:  # bounded: method names come from the outside
            cache[method] = head
        return head

    def _response_from_message(self, message: dict[str, Any]) -> CloudEvent:
        attributes: dict[str, Any] = {
            "specversion": SPECVERSION,
            "id": new_id(),
            "source": self.source,
            "type": self.response_type,
            "datacontenttype": media_types.JSON,
            ext.PROTOCOL: PROTOCOL_NAME,
            ext.MCPTYPE: mcptype.RESPONSE,
        }
        if message["id"] is not None:
            attributes[ext.COLLABORATION] = str(message["id"])
        return new_event(attributes, message)

    def response_event(
        self, request: CloudEvent, response: dict[str, Any], *, source: str | None = None
    ) -> CloudEvent:
        """The event answering ``request``: correlated by ``collaborationid``, in
        its trace (``traceparent``/``tracestate``)."""
        attributes: dict[str, Any] = {
            "specversion": SPECVERSION,
            "id": new_id(),
            "source": source or self.source,
            "type": self.response_type,
            "datacontenttype": media_types.JSON,
            ext.PROTOCOL: PROTOCOL_NAME,
            ext.MCPTYPE: mcptype.RESPONSE,
            ext.COLLABORATION: request.get_id(),
        }
        asked = request.get_attributes()
        method = asked.get(ext.METHOD)
        if method is not None:
            attributes[ext.METHOD] = method
        traceparent = asked.get(ext.TRACEPARENT)
        if traceparent is not None and not _as_sent(traceparent):
            # From outside the bus's doors (written straight to an agent's topic): on
            # as the bus sends one, or dropped with its tracestate when malformed.
            traceparent = propagated_traceparent(traceparent)
        if traceparent is not None:
            attributes[ext.TRACEPARENT] = traceparent
            tracestate = asked.get(ext.TRACESTATE)
            if tracestate is not None:
                attributes[ext.TRACESTATE] = tracestate
        task_id = asked.get(ext.TASK_ID)
        if task_id is not None:
            # The task log orders and times a task's records by these.
            attributes[ext.TASK_ID] = attributes[ext.PARTITION_KEY] = task_id
            attributes["time"] = datetime.now(UTC)
        return new_event(attributes, response)

    # -- CloudEvent -> JSON-RPC -----------------------------------------------------

    def to_jsonrpc(self, event: CloudEvent) -> dict[str, Any]:
        """Rebuild a JSON-RPC message from the event's attributes and data.

        Events converted from JSON-RPC come back as the same message. Native events
        map by their attributes: :func:`~a2a_bus.protocol.kinds.event_kind` says
        request, response or notification; the method is ``a2amethod`` or derived
        from ``type``; routing attributes return to ``params`` as ``_agentId``,
        ``_topic``, ``_seq``, ``_sessionId``.
        """
        attributes = event.get_attributes()
        data = event.get_data()
        message = jsonrpc_of(data)
        kind = event_kind(event)
        if kind is Kind.RESPONSE:
            return self._response_to_jsonrpc(attributes, data, message)
        method = attributes.get(ext.METHOD) or self._method_from_type(attributes.get("type", ""))
        out: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        params = message.get("params") if message is not None else _params_from_data(data)
        params = _with_routing(params, attributes)
        if params is not None:
            out["params"] = params
        if kind is Kind.REQUEST:
            out["id"] = message["id"] if message is not None and "id" in message else event.get_id()
        return out

    def method_of(self, event: CloudEvent) -> str | None:
        """The method an event calls (PROTOCOL.md section 3): ``a2amethod``, else its
        type without the prefix and the ``.req``/``.stream`` suffix, ``.`` -> ``/``.

        None for a response, for an event with a ``subject`` (published to its
        subscribers, not a call) and for a type outside the prefix (a native event of
        its own type calls no method).
        """
        attributes = event.get_attributes()
        method = attributes.get(ext.METHOD)
        if isinstance(method, str):
            return method
        if attributes.get("subject") is not None:
            return None
        type_ = attributes.get("type", "")
        if event_kind(event) is Kind.RESPONSE or not type_.startswith(self.prefix + "."):
            return None
        return self._method_from_type(type_) or None

    def with_method(self, event: CloudEvent) -> CloudEvent:
        """``event`` itself when it has ``a2amethod`` or calls no method, else a copy
        with the method derived from its type set as ``a2amethod``."""
        attributes = event.get_attributes()
        if ext.METHOD in attributes:
            return event
        method = self.method_of(event)
        if method is None:
            return event
        return adopt_event({**attributes, ext.METHOD: method}, event.get_data())

    def _response_to_jsonrpc(
        self, attributes: dict[str, Any], data: Any, message: dict[str, Any] | None
    ) -> dict[str, Any]:
        if message is not None and "id" in message:
            id = message["id"]
        else:
            id = attributes.get(ext.COLLABORATION)
        if message is not None and "error" in message:
            return {"jsonrpc": "2.0", "error": message["error"], "id": id}
        result = message["result"] if message is not None and "result" in message else data
        return {"jsonrpc": "2.0", "result": result, "id": id}

    def _method_from_type(self, type_: str) -> str:
        head = self.prefix + "."
        if not type_.startswith(head):
            return type_
        name = type_[len(head) :]
        for suffix in (REQUEST_SUFFIX, STREAM_SUFFIX):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        return name.replace(".", "/")


def _params_from_data(data: Any) -> Any:
    if data is None or type(data) in (dict, list):
        return data
    if isinstance(data, bytes | bytearray):
        return {"data_base64": base64.b64encode(data).decode()}
    return {"data": data}


def _with_routing(params: Any, attributes: dict[str, Any]) -> Any:
    """Put routing attributes back into ``params`` where the message lacks them."""
    missing = {
        member: attributes[attribute]
        for member, attribute in _ROUTING
        if attribute in attributes and (type(params) is not dict or member not in params)
    }
    if not missing or type(params) is list:
        return params
    return {**(params or {}), **missing}


def _as_sent(traceparent: Any) -> bool:
    """``traceparent`` has the form the bus sends (version 00, no flag but ``sampled``):
    a shape check, cheaper than parsing it, for what every answer passes on."""
    return (
        type(traceparent) is str
        and len(traceparent) == 55
        and traceparent[:3] == "00-"
        and traceparent[53:] in ("00", "01")
    )
