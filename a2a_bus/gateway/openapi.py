"""``GET /openapi.json``: the gateway's OpenAPI 3.1 document, written by hand.

It describes every endpoint, every status it answers with and the shape of each
body, as the code has them; ``tests/gateway/test_openapi.py`` drives a live
gateway with schemathesis and checks every response against it, so a change to
an endpoint that this document does not follow fails there. The limits of the
gateway's settings (body size, batch length) and, with tokens, the bearer scheme
are filled in when the app is made.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from a2a_bus.gateway.openapi_components import (
    A2A_EXAMPLES,
    CHALLENGE,
    JSON,
    OPENAPI_VERSION,
    PROMETHEUS,
    ROUTING,
    RPC_EXAMPLES,
    SSE,
    STOPPED,
    UNAUTHORIZED,
    Schema,
    component_schemas,
    json_body,
    path_param,
    problem,
    ref,
    rpc_problem,
)
from a2a_bus.gateway.responses import JSONResponse


def _rpc() -> Schema:
    return {
        "summary": "JSON-RPC 2.0, single and batch",
        "description": "Anything that is not a valid JSON-RPC message or batch is answered "
        "with its JSON-RPC error, with HTTP 200 (as JSON-RPC over HTTP asks).",
        "requestBody": {
            "required": True,
            "content": {
                JSON: {
                    "schema": {"anyOf": [ref("JsonRpcMessage"), ref("JsonRpcBatch")]},
                    "examples": RPC_EXAMPLES,
                }
            },
        },
        "responses": {
            "200": {
                "description": "The response (an array for a batch), or a streaming method's "
                "chunks as Server-Sent Events when asked for with Accept: text/event-stream.",
                "content": {
                    JSON: {
                        "schema": {
                            "oneOf": [
                                ref("JsonRpcResponse"),
                                {"type": "array", "items": ref("JsonRpcResponse")},
                            ]
                        }
                    },
                    SSE: {"schema": {"type": "string"}},
                },
            },
            "204": {"description": "Only notifications: nothing to answer."},
            "401": rpc_problem("A valid bearer token is required (-32004).", **CHALLENGE),
            "413": rpc_problem("The body is over the limit (-32005)."),
            **STOPPED,
            **ROUTING,
        },
    }


def _events(max_batch: int) -> Schema:
    binary_headers = [
        {"name": f"ce-{name}", "in": "header", "required": False, "schema": {"type": "string"}}
        for name in ("specversion", "id", "source", "type", "subject", "targetagent", "a2amethod")
    ]
    return {
        "summary": "Publish CloudEvents (HTTP binding: binary, structured, batch)",
        "description": "All or nothing: every event is decoded, bounded, routed and checked "
        "against the token's allow-lists before any is published.",
        "parameters": binary_headers,
        "requestBody": {
            "required": True,
            "content": {
                JSON: {"schema": {}, "description": "Binary mode: the data, ce-* headers."},
                "application/cloudevents+json": {"schema": ref("CloudEvent")},
                "application/cloudevents-batch+json": {
                    "schema": {
                        "type": "array",
                        "items": ref("CloudEvent"),
                        "minItems": 1,
                        "maxItems": max_batch,
                    }
                },
            },
        },
        "responses": {
            "202": json_body(
                {
                    "type": "object",
                    "required": ["accepted"],
                    "properties": {
                        "accepted": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["id", "topic"],
                                "properties": {
                                    "id": {"type": "string"},
                                    "topic": {"type": "string"},
                                },
                            },
                        }
                    },
                },
                "Published: each event's id and the topic it went to.",
            ),
            "400": problem("A malformed event, an empty or over-long batch, nowhere to go."),
            **UNAUTHORIZED,
            "403": problem("An event the token may not send."),
            "404": problem(
                "An unknown method or agent (or, from the router, no endpoint at this path)."
            ),
            "405": ROUTING["405"],
            "413": problem("The body, or an event's data or attributes, is over the bound."),
            **STOPPED,
        },
    }


_SEGMENT = "[A-Za-z0-9_-]+"
_SELECTOR = rf"({_SEGMENT}|\*|#)"
_SUBJECTS = path_param(
    "subject",
    "Subjects: dot-separated segments, '*' one segment, '#' one or more ('#' as %23).",
    rf"^{_SELECTOR}(\.{_SELECTOR})*$",
)
_SUBJECT = path_param(
    "subject", "A subject: dot-separated segments, no wildcards.", rf"^{_SEGMENT}(\.{_SEGMENT})*$"
)
_AGENT = path_param("agent_id", "An agent id.", r"^[A-Za-z0-9._-]+$")


def _tail() -> Schema:
    return {
        "summary": "A live view of a subject (Server-Sent Events, never ends by itself)",
        "parameters": [_SUBJECTS],
        "responses": {
            "200": {
                "description": "Each event as ``event: cloudevent``; comments keep it alive.",
                "content": {SSE: {"schema": {"type": "string"}}},
            },
            "400": problem("An invalid subject."),
            **UNAUTHORIZED,
            "403": problem("A subject the token may not see."),
            **STOPPED,
            **ROUTING,
        },
    }


def _history() -> Schema:
    query = [
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
        },
        {"name": "cursor", "in": "query", "schema": {"type": "string"}},
        {"name": "newest", "in": "query", "schema": {"enum": ["true", "false", "1", "0"]}},
    ]
    page = {
        "type": "object",
        "required": ["events", "cursor", "undecodable"],
        "properties": {
            "events": {"type": "array", "items": ref("CloudEvent")},
            "cursor": {"type": "string"},
            "undecodable": {"type": "integer", "minimum": 0},
        },
    }
    return {
        "summary": "Pages of the events a subject retains",
        "parameters": [_SUBJECT, *query],
        "responses": {
            "200": json_body(page, "Events, oldest first, and the cursor of the next page."),
            "400": problem("A bad limit, cursor or subject (no wildcards here)."),
            **UNAUTHORIZED,
            "403": problem("A subject the token may not see."),
            "504": problem("The read outlasted its request timeout."),
            **STOPPED,
            **ROUTING,
        },
    }


def _a2a_endpoint(agent: bool, root: str | None = None) -> Schema:
    """``POST /a2a/{agent_id}`` (``agent``), ``POST /a2a``, or the root agent's ``POST /``."""
    parameters = [_AGENT] if agent else []
    parameters.append(
        {"name": "A2A-Version", "in": "header", "required": False, "schema": {"type": "string"}}
    )
    one = agent or root is not None
    not_found = "An agent that is not live, or not the token's (-32601)" if one else ""
    whose = " of one agent" if agent else " (by method)" if root is None else f" of {root}"
    return {
        "summary": "The A2A JSON-RPC binding" + whose,
        "parameters": parameters,
        "requestBody": {
            "required": True,
            "content": {JSON: {"schema": ref("JsonRpcMessage"), "examples": A2A_EXAMPLES}},
        },
        "responses": {
            "200": {
                "description": "The JSON-RPC response (the task), or SendStreamingMessage / "
                "message/stream as Server-Sent Events.",
                "content": {
                    JSON: {"schema": ref("JsonRpcResponse")},
                    SSE: {"schema": {"type": "string"}},
                },
            },
            "401": rpc_problem("A valid bearer token is required.", **CHALLENGE),
            "403": rpc_problem("A method the token may not call."),
            "404": json_body(
                {"oneOf": [ref("JsonRpcResponse"), ref("Problem")]},
                (not_found + "; " if not_found else "")
                + "from the router: no endpoint at this path.",
            ),
            "405": ROUTING["405"],
            "413": rpc_problem("The body is over the limit."),
            "429": rpc_problem("The token is at its bound of unfinished tasks (-32000)."),
            **STOPPED,
        },
    }


def _get(
    summary: str, responses: dict[str, Schema], parameters: list[Schema] | None = None
) -> Schema:
    operation: Schema = {"summary": summary, "responses": {**responses, **ROUTING}}
    if parameters:
        operation["parameters"] = parameters
    return {"get": operation}


def document(
    *, max_body_bytes: int, max_batch: int, secured: bool, a2a_root: str | None = None
) -> Schema:
    """The OpenAPI document of a gateway with these limits (bearer tokens when
    ``secured``; the agent ``a2a_root`` at the root)."""
    a2a_card = json_body(ref("A2ACard"), "The A2A agent card.")
    agent_card_responses = {"200": a2a_card, **UNAUTHORIZED, "404": problem("No live agent.")}
    gateway_card = _get(
        "The gateway's own A2A card (one skill per agent)", {"200": a2a_card, **UNAUTHORIZED}
    )
    paths: dict[str, Schema] = {
        "/rpc": {"post": _rpc()},
        "/events": {"post": _events(max_batch)},
        "/topics/{subject}/events": {"get": _tail()},
        "/topics/{subject}/history": {"get": _history()},
        "/agents": _get(
            "The cards of the live agents (those the token may see)",
            {
                "200": json_body(
                    {
                        "type": "object",
                        "required": ["agents"],
                        "properties": {"agents": {"type": "array", "items": ref("AgentCard")}},
                    },
                    "Local agents first, then by id.",
                ),
                **UNAUTHORIZED,
            },
        ),
        "/agents/{agent_id}": _get(
            "One agent's card",
            {
                "200": json_body(ref("AgentCard"), "The card."),
                "400": problem("Not a valid agent id."),
                **UNAUTHORIZED,
                "404": problem("No live agent with this id (or none the token may see)."),
            },
            [_AGENT],
        ),
        "/healthz": _get(
            "The process answers",
            {
                "200": json_body(
                    {"type": "object", "properties": {"status": {"const": "ok"}}}, "Up."
                )
            },
        ),
        "/readyz": _get(
            "The bus runs, its broker answers, no agent hosted here failed",
            {
                "200": json_body(
                    {"type": "object", "properties": {"status": {"const": "ready"}}}, "Ready."
                ),
                "503": json_body(
                    {
                        "type": "object",
                        "required": ["status", "reason"],
                        "properties": {
                            "status": {"const": "not ready"},
                            "reason": {"type": "string"},
                            "failed": {
                                "type": "object",
                                "additionalProperties": {"type": "string"},
                            },
                        },
                    },
                    "Not ready: why, and the agents that failed (id -> why).",
                ),
            },
        ),
        "/metrics": _get(
            "Every metric of the process (Prometheus text format)",
            {
                "200": {
                    "description": "Metrics.",
                    "content": {PROMETHEUS: {"schema": {"type": "string"}}},
                }
            },
        ),
        "/openapi.json": _get(
            "This document", {"200": json_body({"type": "object"}, "The OpenAPI document.")}
        ),
        "/.well-known/agent-card.json": gateway_card,
        "/a2a/.well-known/agent-card.json": gateway_card,
        "/a2a": {"post": _a2a_endpoint(agent=False)},
        "/a2a/{agent_id}": {"post": _a2a_endpoint(agent=True)},
        "/a2a/{agent_id}/.well-known/agent-card.json": _get(
            "An agent's A2A card", agent_card_responses, [_AGENT]
        ),
        "/a2a/{agent_id}/.well-known/agent.json": _get(
            "An agent's A2A card (the path before A2A 0.3)", agent_card_responses, [_AGENT]
        ),
    }
    if a2a_root is not None:
        root_card = f"The A2A card of {a2a_root}, the agent at the root"
        paths["/.well-known/agent-card.json"] = _get(root_card, agent_card_responses)
        paths["/.well-known/agent.json"] = _get(
            f"{root_card} (the path before A2A 0.3)", agent_card_responses
        )
        paths["/"] = {"post": _a2a_endpoint(agent=False, root=a2a_root)}
    doc: Schema = {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "a2a-bus gateway",
            "version": "0.1.0",
            "description": "JSON-RPC 2.0, the CloudEvents HTTP binding, live views and "
            f"history of subjects, discovery, A2A. Request bodies up to {max_body_bytes} bytes.",
        },
        "paths": paths,
        "components": {"schemas": component_schemas(max_batch)},
    }
    if secured:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
        for path in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
            doc["paths"][path]["get"]["security"] = []  # open with tokens too
    return doc


def path_template(route_path: str) -> str:
    """A route's path as the document names it: its parameters without Starlette's
    converters (``/topics/{subject:path}/events`` is ``/topics/{subject}/events``)."""
    return _CONVERTER.sub(r"{\1}", route_path)


_CONVERTER = re.compile(r"\{(\w+):\w+\}")


def openapi_endpoint(doc: Schema) -> Any:
    """The ``GET /openapi.json`` handler serving ``doc``."""

    async def openapi(request: Request) -> Response:
        return JSONResponse(doc)

    return openapi
