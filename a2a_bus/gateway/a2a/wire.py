"""The A2A JSON-RPC binding's shapes, for protocol 1.0 and for 0.3.

1.0 (what the current ``a2a-sdk`` speaks): methods ``SendMessage``,
``SendStreamingMessage``, ``GetTask``, ``CancelTask``; the ProtoJSON form of the
protocol buffers (``ROLE_USER``, ``TASK_STATE_COMPLETED``, parts ``{"text": ...}`` or
``{"data": ...}``, results wrapped as ``{"task": ...}`` or ``{"statusUpdate": ...}``).
0.3: ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``; objects
tagged by ``kind``, lower-case states, unwrapped results, ``final`` on the last
status update.

This module names the methods and renders what goes out; :mod:`.params` reads
what comes in.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from a2a_bus.gateway.a2a.errors import A2ACode, A2AError
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
