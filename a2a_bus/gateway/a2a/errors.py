"""A2A errors: the protocol's JSON-RPC codes, and how each version words them.

1.0 puts a ``google.rpc.ErrorInfo`` (reason, domain, string metadata) in ``data``;
0.3 puts the metadata object there.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from a2a_bus.protocol import error_response


class A2ACode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    TASK_NOT_FOUND = -32001
    TASK_NOT_CANCELABLE = -32002
    PUSH_NOTIFICATION_NOT_SUPPORTED = -32003
    UNSUPPORTED_OPERATION = -32004
    CONTENT_TYPE_NOT_SUPPORTED = -32005
    INVALID_AGENT_RESPONSE = -32006
    EXTENDED_AGENT_CARD_NOT_CONFIGURED = -32007
    EXTENSION_SUPPORT_REQUIRED = -32008
    VERSION_NOT_SUPPORTED = -32009
    #: Not A2A's: the protocol has no code for a refusal for capacity (its advice
    #: stops at "return appropriate errors"), and borrowing one of its codes would
    #: tell a client something false (-32004: the operation is not offered at all).
    #: -32000 is JSON-RPC's first implementation-defined server error, which A2A
    #: leaves unused; the HTTP status 429 says "not now" to any client.
    TOO_MANY_TASKS = -32000


ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
DOMAIN = "a2a-protocol.org"


class A2AError(Exception):
    """An A2A error answer; ``status`` is the HTTP status it travels with."""

    def __init__(
        self,
        code: A2ACode,
        message: str,
        metadata: dict[str, str] | None = None,
        *,
        status: int = 200,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.metadata = metadata or {}
        self.status = status

    def response(self, id: Any, legacy: bool) -> dict[str, Any]:
        """The JSON-RPC error response, worded for 0.3 (``legacy``) or 1.0."""
        data: Any
        if legacy:
            data = self.metadata or None
        else:
            info = {
                "@type": ERROR_INFO_TYPE,
                "reason": self.code.name,
                "domain": DOMAIN,
                "metadata": self.metadata,
            }
            data = [info]
        return error_response(int(self.code), self.message, id, data)


def invalid_params(message: str, **metadata: str) -> A2AError:
    return A2AError(A2ACode.INVALID_PARAMS, message, metadata)


def task_not_found(task_id: str) -> A2AError:
    return A2AError(A2ACode.TASK_NOT_FOUND, f"Task not found: {task_id!r}", {"taskId": task_id})


def too_many_tasks(bound: int) -> A2AError:
    return A2AError(
        A2ACode.TOO_MANY_TASKS,
        f"Too many tasks: this token has {bound} unfinished tasks, its bound; "
        "wait for one to end (or cancel one) and send again",
        {"maxTasksPerOwner": str(bound)},
        status=429,
    )
