"""Names and defaults of the wire contract (see protocol/PROTOCOL.md)."""

from __future__ import annotations

from typing import Final

#: Type prefix shared with the Apache EventMesh A2A adaptor, so events are wire-compatible.
DEFAULT_TYPE_PREFIX: Final = "org.apache.eventmesh.a2a"
#: ``source`` attribute of events the adaptor creates, unless configured otherwise.
DEFAULT_SOURCE: Final = "a2a-bus"
SPECVERSION: Final = "1.0"
PROTOCOL_NAME: Final = "A2A"

#: Methods with a dedicated type suffix (seed 002: streaming uses ``.stream``).
STREAM_METHOD: Final = "message/sendStream"
REQUEST_SUFFIX: Final = ".req"
STREAM_SUFFIX: Final = ".stream"
RESPONSE_TYPE_SUFFIX: Final = ".common.response"

#: Default cap on one message's size and on a batch's length.
DEFAULT_MAX_MESSAGE_BYTES: Final = 1024 * 1024
DEFAULT_MAX_BATCH: Final = 1000


class ext:
    """CloudEvent attribute names the mapping uses (extensions are lowercase a-z0-9)."""

    TARGET_AGENT: Final = "targetagent"
    SUBJECT: Final = "subject"
    SEQ: Final = "seq"
    SESSION: Final = "sessionid"
    COLLABORATION: Final = "collaborationid"
    MCPTYPE: Final = "mcptype"
    METHOD: Final = "a2amethod"
    PROTOCOL: Final = "protocol"
    PARTITION_KEY: Final = "partitionkey"
    REPLY_TO: Final = "replyto"
    #: W3C Trace Context (the CloudEvents distributed-tracing extension).
    TRACEPARENT: Final = "traceparent"
    TRACESTATE: Final = "tracestate"
    #: Agent handlers above a message, and their ids (see protocol/callchain.py).
    CALLDEPTH: Final = "calldepth"
    CALLCHAIN: Final = "callchain"
    #: On a request run as a task, and on everything answering it: the task's id,
    #: which is also the partitioning key of the answers (one task, one partition).
    TASK_ID: Final = "taskid"


class mcptype:
    """Values of the ``mcptype`` extension."""

    REQUEST: Final = "request"
    RESPONSE: Final = "response"
    NOTIFICATION: Final = "notification"


class params_key:
    """Routing members of JSON-RPC ``params`` promoted to event attributes."""

    AGENT: Final = "_agentId"
    TOPIC: Final = "_topic"
    SEQ: Final = "_seq"
    SESSION: Final = "_sessionId"


ROUTING_PARAMS: Final = frozenset(
    {params_key.AGENT, params_key.TOPIC, params_key.SEQ, params_key.SESSION}
)


class content_type:
    JSON: Final = "application/json"
    CLOUDEVENT: Final = "application/cloudevents+json"
    CLOUDEVENT_BATCH: Final = "application/cloudevents-batch+json"
