"""The wire contract in pure code: JSON-RPC 2.0, the A2A adaptor, CloudEvents codecs.

Nothing here does I/O or starts threads, so all of it can be tested and fuzzed alone.
"""

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol.adaptor import Adaptor, Converted
from a2a_bus.protocol.callchain import (
    DEFAULT_MAX_CALL_DEPTH,
    call_chain,
    call_depth,
    depth_refusal,
    next_call,
)
from a2a_bus.protocol.constants import (
    DEFAULT_SOURCE,
    DEFAULT_TYPE_PREFIX,
    ROUTING_PARAMS,
    content_type,
    ext,
    mcptype,
    params_key,
)
from a2a_bus.protocol.errors import (
    ErrorCode,
    Failure,
    InputRequired,
    JsonRpcError,
    JsonRpcId,
    ProtocolError,
    error_object,
    error_response,
    result_response,
)
from a2a_bus.protocol.events import (
    control_character,
    events_equal,
    extension_problem,
    new_event,
    new_id,
    validated_event,
)
from a2a_bus.protocol.formats import (
    dump_structured,
    from_structured,
    load_structured,
    to_structured,
)
from a2a_bus.protocol.http_codec import from_http, to_http, to_http_batch
from a2a_bus.protocol.jsonrpc import Kind, classify, classify_call, jsonrpc_of
from a2a_bus.protocol.kafka_codec import KafkaRecord, from_kafka, key_of, record_key, to_kafka
from a2a_bus.protocol.kinds import event_kind, kind_of
from a2a_bus.protocol.parsing import parse_json, whole_number
from a2a_bus.protocol.tracecontext import (
    TraceParent,
    adopt_trace,
    format_traceparent,
    new_traceparent,
    parse_traceparent,
    propagated_traceparent,
    valid_tracestate,
)

__all__ = [
    "DEFAULT_MAX_CALL_DEPTH",
    "DEFAULT_SOURCE",
    "DEFAULT_TYPE_PREFIX",
    "ROUTING_PARAMS",
    "Adaptor",
    "CloudEvent",
    "Converted",
    "ErrorCode",
    "Failure",
    "InputRequired",
    "JsonRpcError",
    "JsonRpcId",
    "KafkaRecord",
    "Kind",
    "ProtocolError",
    "TraceParent",
    "adopt_trace",
    "call_chain",
    "call_depth",
    "classify",
    "classify_call",
    "content_type",
    "control_character",
    "depth_refusal",
    "dump_structured",
    "error_object",
    "error_response",
    "event_kind",
    "events_equal",
    "ext",
    "extension_problem",
    "format_traceparent",
    "from_http",
    "from_kafka",
    "from_structured",
    "jsonrpc_of",
    "key_of",
    "kind_of",
    "load_structured",
    "mcptype",
    "new_event",
    "new_id",
    "new_traceparent",
    "next_call",
    "params_key",
    "parse_json",
    "parse_traceparent",
    "propagated_traceparent",
    "record_key",
    "result_response",
    "to_http",
    "to_http_batch",
    "to_kafka",
    "to_structured",
    "valid_tracestate",
    "validated_event",
    "whole_number",
]
