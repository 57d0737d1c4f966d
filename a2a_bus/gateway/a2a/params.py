"""The params of the A2A methods, read and checked: a send's message and its
configuration, a task query, and 1.0 field names as the ``.proto`` file spells them.

Whatever a client may get wrong is answered with the protocol's ``-32602`` naming
the field (``-32005`` for a file part), before any task exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a_bus.core.payload import PayloadError, check_payload
from a2a_bus.gateway.a2a.errors import A2ACode, A2AError, invalid_params
from a2a_bus.gateway.a2a.model import Message, Part
from a2a_bus.gateway.a2a.wire import Version

#: A sent message's role, as 1.0 and 0.3 name it.
USER_ROLES = ("ROLE_USER", "user")


@dataclass(frozen=True)
class SendRequest:
    message: Message
    blocking: bool
    history_length: int | None


def as_object(value: Any, what: str) -> dict[str, Any]:
    """``value``, an object; -32602 naming ``what`` otherwise."""
    if not isinstance(value, dict):
        raise invalid_params(f"{what} must be an object")
    return value


def optional_str(value: Any, what: str) -> str | None:
    """A string, or None when absent or empty."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise invalid_params(f"{what} must be a string")
    return value


def history_length(value: Any) -> int | None:
    """``historyLength``: a whole number from 0, or None."""
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
    part = as_object(raw, where)
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
    body = as_object(params, "params")
    raw = as_object(body.get("message"), "params.message")
    parts = raw.get("parts")
    if not isinstance(parts, list) or not parts:
        raise invalid_params("params.message.parts must be a non-empty array")
    message_id = optional_str(raw.get("messageId"), "message.messageId")
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
        context_id=optional_str(raw.get("contextId"), "message.contextId"),
        task_id=optional_str(raw.get("taskId"), "message.taskId"),
    )
    config = body.get("configuration")
    config = as_object(config, "params.configuration") if config is not None else {}
    if version is Version.V1:
        blocking = not _flag(config, "returnImmediately", False)
    else:
        blocking = _flag(config, "blocking", True)
    return SendRequest(message, blocking, history_length(config.get("historyLength")))


def parse_task_query(params: Any) -> tuple[str, int | None]:
    """The task id (and history length) of ``GetTask``/``CancelTask`` and their 0.3 names."""
    body = as_object(params, "params")
    task_id = optional_str(body.get("id"), "params.id")
    if task_id is None:
        raise invalid_params("params.id (the task id) is required")
    return task_id, history_length(body.get("historyLength"))


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
