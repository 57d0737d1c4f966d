"""The parts of the gateway's OpenAPI document that its operations share: media
types, response helpers, the refusals every endpoint may answer with, the
component schemas and the request examples (see :mod:`a2a_bus.gateway.openapi`)."""

from __future__ import annotations

from typing import Any

OPENAPI_VERSION = "3.1.0"
JSON = "application/json"
SSE = "text/event-stream"
#: The Prometheus text format ``/metrics`` answers with (any version of it).
PROMETHEUS = "text/plain"

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(schema: Schema, description: str, **extra: Any) -> Schema:
    return {"description": description, "content": {JSON: {"schema": schema}}, **extra}


def problem(description: str) -> Schema:
    return json_body(ref("Problem"), description)


def rpc_problem(description: str, **extra: Any) -> Schema:
    """A refusal before JSON-RPC (401, 413, ...): a JSON-RPC error response, id null."""
    return json_body(ref("JsonRpcResponse"), description, **extra)


#: Sent with every 401 (RFC 6750).
CHALLENGE = {"headers": {"WWW-Authenticate": {"schema": {"type": "string"}, "required": True}}}


#: Every endpoint answers these when its path or method is not one it serves (a path
#: parameter holding a ``/`` names another path): the router's ``{"error": ...}``.
ROUTING = {
    "404": problem('No endpoint at this path (``{"error": "Not Found"}``).'),
    "405": problem("The path is another endpoint's, for another method."),
}
UNAUTHORIZED = {
    "401": json_body(
        ref("Problem"), "A valid bearer token is required (tokens are configured).", **CHALLENGE
    )
}
STOPPED = {"503": problem("The bus is not running (the gateway is stopping).")}


def path_param(name: str, description: str, pattern: str | None = None) -> Schema:
    schema: Schema = {"type": "string", "minLength": 1}
    if pattern is not None:
        schema["pattern"] = pattern
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema,
    }


def component_schemas(max_batch: int) -> dict[str, Schema]:
    any_id = {"type": ["string", "number", "null"]}
    return {
        "Problem": {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "string"}},
        },
        "JsonRpcError": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
        },
        "JsonRpcResponse": {
            "type": "object",
            "required": ["jsonrpc", "id"],
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "id": any_id,
                "result": {},
                "error": ref("JsonRpcError"),
            },
            "oneOf": [{"required": ["result"]}, {"required": ["error"]}],
        },
        "JsonRpcMessage": {
            "type": "object",
            "required": ["jsonrpc", "method"],
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "method": {"type": "string"},
                "params": {"type": ["object", "array"]},
                "id": any_id,
            },
        },
        "JsonRpcBatch": {
            "type": "array",
            "items": ref("JsonRpcMessage"),
            "minItems": 1,
            "maxItems": max_batch,
        },
        "CloudEvent": {
            "type": "object",
            "description": "A structured CloudEvent (JSON format), extensions as members.",
            "required": ["specversion", "id", "source", "type"],
            "properties": {
                "specversion": {"const": "1.0"},
                "id": {"type": "string", "minLength": 1},
                "source": {"type": "string", "minLength": 1},
                "type": {"type": "string", "minLength": 1},
                "subject": {"type": "string"},
                "datacontenttype": {"type": "string"},
                "data": {},
                "data_base64": {"type": "string"},
            },
        },
        "AgentCard": {
            "type": "object",
            "description": "An agent's discovery card (more members may follow).",
            "required": ["id"],
            "properties": {
                "id": {"type": "string"},
                "description": {"type": ["string", "null"]},
                "version": {"type": "string"},
                "methods": {"type": "array", "items": {"type": "object"}},
                "subscriptions": {"type": "array", "items": {"type": "string"}},
                "node": {"type": "string"},
                "replicas": {"type": "integer"},
                "heartbeatAt": {"type": "number"},
                "status": {"enum": ["running", "degraded", "failed"]},
                "failure": {"type": "string"},
            },
        },
        "A2ACard": {
            "type": "object",
            "description": "An A2A agent card, with the 1.0 and the 0.3 fields.",
            "required": ["name", "description", "url", "version", "capabilities", "skills"],
            "properties": {
                "name": {"type": "string"},
                "description": {"type": "string"},
                "url": {"type": "string"},
                "version": {"type": "string"},
                "protocolVersion": {"type": "string"},
                "preferredTransport": {"type": "string"},
                "supportedInterfaces": {"type": "array", "items": {"type": "object"}},
                "capabilities": {"type": "object"},
                "skills": {"type": "array", "items": {"type": "object"}},
            },
        },
    }


RPC_EXAMPLES = {
    "call": {
        "summary": "A call, routed by method",
        "value": {"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1},
    },
    "agent": {
        "summary": "A call to one agent",
        "value": {
            "jsonrpc": "2.0",
            "method": "add",
            "params": {"_agentId": "calc", "a": 2, "b": 40},
            "id": "a",
        },
    },
    "batch": {
        "summary": "A batch: a request and a notification",
        "value": [
            {"jsonrpc": "2.0", "method": "multiply", "params": {"a": 6, "b": 7}, "id": "1"},
            {"jsonrpc": "2.0", "method": "shout", "params": ["hello"]},
        ],
    },
    "stream": {
        "summary": "A streaming method (SSE with Accept: text/event-stream)",
        "value": {"jsonrpc": "2.0", "method": "count", "params": {"to": 5}, "id": "s"},
    },
}

A2A_EXAMPLES = {
    "send": {
        "summary": "message/send calling a method with a data part",
        "value": {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "message/send",
            "params": {
                "message": {
                    "kind": "message",
                    "messageId": "m-1",
                    "role": "user",
                    "parts": [{"kind": "data", "data": {"method": "add", "params": [2, 40]}}],
                }
            },
        },
    },
    "get": {
        "summary": "tasks/get",
        "value": {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "t-1"}},
    },
}
