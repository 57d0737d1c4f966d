"""The A2A JSON-RPC binding's shapes, for protocol 1.0 and for 0.3.

1.0 (what the current ``a2a-sdk`` speaks): methods ``SendMessage``,
``SendStreamingMessage``, ``GetTask``, ``CancelTask``; the ProtoJSON form of the
protocol buffers (``ROLE_USER``, ``TASK_STATE_COMPLETED``, parts ``{"text": ...}`` or
``{"data": ...}``, results wrapped as ``{"task": ...}`` or ``{"statusUpdate": ...}``).
0.3: ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``; objects
tagged by ``kind``, lower-case states, unwrapped results, ``final`` on the last
status update.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from a2a_bus.core.payload import PayloadError, check_payload
from a2a_bus.gateway.a2a.errors import A2ACode, A2AError, invalid_params
from a2a_bus.gateway.a2a.model import Artifact, Message, Part, Task, TaskState


class Version(Enum):
    V1 = "1.0"
    V03 = "0.3"


class Op(Enum):
    SEND = "send"
    STREAM = "stream"
    GET = "get"
    CANCEL = "cancel"
    LIST = "list"
    SUBSCRIBE = "subscribe"


#: The methods this binding serves, in both versions.
METHODS: dict[str, tuple[Op, Version]] = {
    "SendMessage": (Op.SEND, Version.V1),
    "SendStreamingMessage": (Op.STREAM, Version.V1),
    "GetTask": (Op.GET, Version.V1),
    "CancelTask": (Op.CANCEL, Version.V1),
    "ListTasks": (Op.LIST, Version.V1),
    "SubscribeToTask": (Op.SUBSCRIBE, Version.V1),
    "message/send": (Op.SEND, Version.V03),
    "message/stream": (Op.STREAM, Version.V03),
    "tasks/get": (Op.GET, Version.V03),
    "tasks/cancel": (Op.CANCEL, Version.V03),
    "tasks/resubscribe": (Op.SUBSCRIBE, Version.V03),
}

#: Methods of the protocol this binding does not offer, and the error they get.
UNSUPPORTED: dict[str, A2ACode] = {
    **dict.fromkeys(
        ("GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"),
        A2ACode.EXTENDED_AGENT_CARD_NOT_CONFIGURED,
    ),
}


def method_of(name: str) -> tuple[Op, Version]:
    """The operation a JSON-RPC method names; the protocol's error otherwise."""
    known = METHODS.get(name)
    if known is not None:
        return known
    code = UNSUPPORTED.get(name)
    if code is not None:
        raise A2AError(code, f"{name} is not supported by this agent", {"method": name})
    raise A2AError(A2ACode.METHOD_NOT_FOUND, f"Method not found: {name!r}", {"method": name})


def check_version(header: str | None) -> None:
    """An ``A2A-Version`` header names 1.x or 0.3 (or is absent)."""
    if header is None or not header.strip():
        return
    value = header.strip()
    if value == "1" or value.startswith(("1.", "0.3")):
        return
    raise A2AError(
        A2ACode.VERSION_NOT_SUPPORTED,
        f"A2A version {value!r} is not supported; this endpoint speaks 1.0 and 0.3",
        {"version": value},
    )


# -- rendering -----------------------------------------------------------------------


def _state(state: TaskState, version: Version) -> str:
    if version is Version.V03:
        return state.value
    return "TASK_STATE_" + state.name


def part_json(part: Part, version: Version) -> dict[str, Any]:
    if version is Version.V1:
        return {part.kind: part.value}
    if part.kind == "text":
        return {"kind": "text", "text": part.value}
    if isinstance(part.value, dict):
        return {"kind": "data", "data": part.value}
    # 0.3 data parts hold objects; other values are wrapped as the SDK does.
    return {"kind": "data", "data": {"value": part.value}, "metadata": {"data_part_compat": True}}


def message_json(message: Message, version: Version) -> dict[str, Any]:
    legacy = version is Version.V03
    out: dict[str, Any] = {"kind": "message"} if legacy else {}
    out["messageId"] = message.message_id
    out["role"] = message.role if legacy else "ROLE_" + message.role.upper()
    out["parts"] = [part_json(p, version) for p in message.parts]
    if message.context_id is not None:
        out["contextId"] = message.context_id
    if message.task_id is not None:
        out["taskId"] = message.task_id
    return out


def artifact_json(artifact: Artifact, version: Version) -> dict[str, Any]:
    out: dict[str, Any] = {
        "artifactId": artifact.artifact_id,
        "name": artifact.name,
        "parts": [part_json(p, version) for p in artifact.parts],
    }
    if artifact.metadata:
        out["metadata"] = artifact.metadata
    return out


def status_json(task: Task, version: Version) -> dict[str, Any]:
    status: dict[str, Any] = {"state": _state(task.state, version), "timestamp": task.timestamp}
    if task.message is not None:
        status["message"] = message_json(task.message, version)
    return status


def task_json(
    task: Task, version: Version, history_length: int | None = None, *, artifacts: bool = True
) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "task"} if version is Version.V03 else {}
    out.update(id=task.id, contextId=task.context_id, status=status_json(task, version))
    if task.artifacts and artifacts:
        out["artifacts"] = [artifact_json(a, version) for a in task.artifacts]
    history = task.history if history_length is None else task.history[-history_length:]
    if history and history_length != 0:
        out["history"] = [message_json(m, version) for m in history]
    if task.metadata:
        out["metadata"] = task.metadata
    return out


def task_result(task: Task, version: Version, history_length: int | None = None) -> Any:
    """The result of a send, or the first event of a stream: the task."""
    body = task_json(task, version, history_length)
    return body if version is Version.V03 else {"task": body}


def status_update(task: Task, version: Version) -> dict[str, Any]:
    body = {"taskId": task.id, "contextId": task.context_id, "status": status_json(task, version)}
    if version is Version.V1:
        return {"statusUpdate": body}
    return {"kind": "status-update", **body, "final": task.state.terminal}


def artifact_update(
    task: Task, artifact: Artifact, version: Version, *, append: bool, last_chunk: bool
) -> dict[str, Any]:
    body = {
        "taskId": task.id,
        "contextId": task.context_id,
        "artifact": artifact_json(artifact, version),
        "append": append,
        "lastChunk": last_chunk,
    }
    if version is Version.V1:
        return {"artifactUpdate": body}
    return {"kind": "artifact-update", **body}


# -- parsing -------------------------------------------------------------------------


#: A sent message's role, as 1.0 and 0.3 name it.
USER_ROLES = ("ROLE_USER", "user")


@dataclass(frozen=True)
class SendRequest:
    message: Message
    blocking: bool
    history_length: int | None


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid_params(f"{what} must be an object")
    return value


def _optional_str(value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise invalid_params(f"{what} must be a string")
    return value


def _history_length(value: Any) -> int | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value < 0
        or value != int(value)  # (NaN and infinities are not JSON)
    ):
        raise invalid_params("historyLength must be a non-negative integer")
    return int(value)


def _flag(config: dict[str, Any], name: str, default: bool) -> bool:
    value = config.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid_params(f"params.configuration.{name} must be true or false")
    return value


def _integral(value: Any) -> Any:
    """Whole floats as ints: protobuf JSON carries every number as a double, so a
    stock client sends 3 as 3.0, which a method typed ``int`` would refuse."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


#: The part kinds 0.3 names.
_PART_KINDS = ("text", "data", "file")


def _part(raw: Any, index: int) -> Part:
    where = f"message.parts[{index}]"
    part = _object(raw, where)
    kind = part.get("kind")  # (0.3 tags parts; 1.0 parts have no kind)
    if kind is not None and kind not in _PART_KINDS:
        raise invalid_params(f"{where}.kind {kind!r} is not a part kind: text, data or file")
    if isinstance(part.get("text"), str):
        return Part.text(part["text"])
    if "data" in part:
        data = part["data"]
        # Checked before it is walked: orjson writes at most ~254 levels of nesting.
        try:
            check_payload(data, f"{where}.data")
        except PayloadError as exc:
            raise invalid_params(exc.detail) from None
        metadata = part.get("metadata")
        if (
            isinstance(metadata, dict)
            and metadata.get("data_part_compat")
            and type(data) is dict
            and data.keys() == {"value"}
        ):
            data = data["value"]  # 0.3's wrapping of a non-object value
        return Part.data(_integral(data))
    if {"url", "raw", "file"} & part.keys() or part.get("kind") == "file":
        raise A2AError(
            A2ACode.CONTENT_TYPE_NOT_SUPPORTED,
            f"{where} is a file; the bus carries JSON: send text or data parts",
            {"part": str(index)},
        )
    raise invalid_params(f"{where} has no text or data")


def parse_send(params: Any, version: Version) -> SendRequest:
    """The message of a send (``SendMessage`` or ``message/send``), checked."""
    body = _object(params, "params")
    raw = _object(body.get("message"), "params.message")
    parts = raw.get("parts")
    if not isinstance(parts, list) or not parts:
        raise invalid_params("params.message.parts must be a non-empty array")
    message_id = _optional_str(raw.get("messageId"), "message.messageId")
    if message_id is None:
        raise invalid_params("params.message.messageId is required")
    # The role is required; a client's message is the user's (either generation's name).
    if raw.get("role") not in USER_ROLES:
        what = "is required" if raw.get("role") is None else "must be the user's"
        raise invalid_params(f"params.message.role {what}: ROLE_USER (0.3: user)")
    message = Message(
        "user",
        [_part(p, i) for i, p in enumerate(parts)],
        message_id=message_id,
        context_id=_optional_str(raw.get("contextId"), "message.contextId"),
        task_id=_optional_str(raw.get("taskId"), "message.taskId"),
    )
    config = body.get("configuration")
    config = _object(config, "params.configuration") if config is not None else {}
    if version is Version.V1:
        blocking = not _flag(config, "returnImmediately", False)
    else:
        blocking = _flag(config, "blocking", True)
    return SendRequest(message, blocking, _history_length(config.get("historyLength")))


def parse_task_query(params: Any) -> tuple[str, int | None]:
    """The task id (and history length) of ``GetTask``/``CancelTask`` and their 0.3 names."""
    body = _object(params, "params")
    task_id = _optional_str(body.get("id"), "params.id")
    if task_id is None:
        raise invalid_params("params.id (the task id) is required")
    return task_id, _history_length(body.get("historyLength"))


#: ``ListTasks`` page sizes (as the a2a-sdk's own server: 50 unless asked, at most 100).
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 100


@dataclass(frozen=True)
class ListQuery:
    context_id: str | None
    state: TaskState | None
    page_size: int
    page_token: str | None
    history_length: int | None
    #: Only tasks whose status changed at or after this instant.
    updated_after: datetime | None
    include_artifacts: bool


def _task_state(value: Any) -> TaskState | None:
    if value is None or value in ("", "TASK_STATE_UNSPECIFIED"):
        return None
    if isinstance(value, str):
        name = value.removeprefix("TASK_STATE_")
        for state in TaskState:
            if name in (state.name, state.value):
                return state
    raise invalid_params(f"status {value!r} is not a task state")


def parse_timestamp(value: Any, what: str) -> datetime | None:
    """An RFC 3339 timestamp (protobuf's JSON form of a Timestamp), or None."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    raise invalid_params(f"{what} must be an RFC 3339 timestamp, not {value!r}")


def parse_list(params: Any) -> ListQuery:
    """The filters and page of ``ListTasks``."""
    body = _object(params if params is not None else {}, "params")
    size = body.get("pageSize")
    if size is None:
        page_size = DEFAULT_PAGE_SIZE
    elif (
        isinstance(size, bool)
        or not isinstance(size, int | float)
        or size != int(size)
        or not 1 <= size <= MAX_PAGE_SIZE
    ):
        raise invalid_params(f"pageSize must be a whole number from 1 to {MAX_PAGE_SIZE}")
    else:
        page_size = int(size)
    include = body.get("includeArtifacts", False)
    if not isinstance(include, bool):
        raise invalid_params("includeArtifacts must be a boolean")
    return ListQuery(
        context_id=_optional_str(body.get("contextId"), "params.contextId"),
        state=_task_state(body.get("status")),
        page_size=page_size,
        page_token=_optional_str(body.get("pageToken"), "params.pageToken"),
        history_length=_history_length(body.get("historyLength")),
        updated_after=parse_timestamp(body.get("statusTimestampAfter"), "statusTimestampAfter"),
        include_artifacts=include,
    )


#: The objects of 1.0 params whose member names ProtoJSON may spell as in the
#: .proto file (``task_id``) rather than in lowerCamelCase (``taskId``): parsers
#: accept both. User data (parts, metadata) is never renamed.
_PROTO_OBJECTS = ("message", "configuration", "authentication", "taskPushNotificationConfig")


def camel_params(params: Any) -> Any:
    """1.0 params with the .proto field names of its envelope objects in
    lowerCamelCase, as ProtoJSON parsers take either."""
    if not isinstance(params, dict):
        return params
    out = {_camel(k): v for k, v in params.items()}
    for key in _PROTO_OBJECTS:
        value = out.get(key)
        if isinstance(value, dict):
            out[key] = camel_params(value)
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest) if rest else name
