"""A2A agent cards, built from the bus's discovery cards.

One card serves both protocol generations, as the ``a2a-sdk`` server writes
them: the 1.0 fields (``supportedInterfaces``, ``securityRequirements``) and the
0.3 ones (``url``, ``preferredTransport``, ``protocolVersion``, ``security``).
"""

from __future__ import annotations

from typing import Any

import orjson

from a2a_bus.gateway.a2a.calls import CONVERSATIONAL, params_schema, streams

CARD_PATH = "/.well-known/agent-card.json"
BINDING = "JSONRPC"
INPUT_MODES = ["application/json", "text/plain"]
OUTPUT_MODES = ["text/plain", "application/json"]
_SCHEME = "bearer"

_PLACEHOLDERS: dict[str, Any] = {
    "string": "",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "array": [],
    "object": {},
}


def _example(entry: dict[str, Any]) -> str:
    """A data part that calls the method, with a placeholder per parameter."""
    properties = params_schema(entry).get("properties") or {}
    params = {
        name: _PLACEHOLDERS.get(str(prop.get("type")) if isinstance(prop, dict) else "")
        for name, prop in properties.items()
    }
    return orjson.dumps({"method": entry.get("name"), "params": params}).decode()


def _skill(entry: dict[str, Any]) -> dict[str, Any]:
    name = str(entry.get("name"))
    tags = ["method"]
    if streams(entry):
        tags.append("streaming")
    if name in CONVERSATIONAL or name.split("/")[0] in CONVERSATIONAL:
        tags.append("conversational")
    return {
        "id": name,
        "name": name,
        "description": str(entry.get("description") or f"The bus method {name}."),
        "tags": tags,
        "examples": [_example(entry)],
    }


def _interfaces(url: str) -> dict[str, Any]:
    return {
        "supportedInterfaces": [
            {"url": url, "protocolBinding": BINDING, "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": BINDING, "protocolVersion": "0.3"},
        ],
        "url": url,
        "preferredTransport": BINDING,
        "protocolVersion": "0.3.0",
    }


def _security(secured: bool) -> dict[str, Any]:
    if not secured:
        return {}
    scheme = {"httpAuthSecurityScheme": {"scheme": "Bearer"}, "type": "http", "scheme": "Bearer"}
    return {
        "securitySchemes": {_SCHEME: scheme},
        "securityRequirements": [{"schemes": {_SCHEME: {}}}],
        "security": [{_SCHEME: []}],
    }


def agent_card(card: dict[str, Any], url: str, *, secured: bool) -> dict[str, Any]:
    """The A2A card of one bus agent, reached at ``url``."""
    methods = [m for m in card.get("methods", ()) if isinstance(m, dict)]
    agent_id = str(card.get("id"))
    return {
        "name": agent_id,
        "description": str(card.get("description") or f"The bus agent {agent_id}."),
        **_interfaces(url),
        "version": str(card.get("version") or "0.1.0"),
        "capabilities": {"streaming": any(streams(m) for m in methods), "pushNotifications": True},
        **_security(secured),
        "defaultInputModes": INPUT_MODES,
        "defaultOutputModes": OUTPUT_MODES,
        "skills": [_skill(m) for m in methods],
    }


def gateway_card(
    cards: list[dict[str, Any]], url: str, agent_url: dict[str, str], *, secured: bool
) -> dict[str, Any]:
    """The gateway's own card: one skill per agent, each naming its endpoint."""
    skills = []
    for card in cards:
        agent_id = str(card.get("id"))
        methods = ", ".join(str(m.get("name")) for m in card.get("methods", ()))
        description = str(card.get("description") or f"The bus agent {agent_id}.")
        skills.append(
            {
                "id": agent_id,
                "name": agent_id,
                "description": f"{description} Its A2A endpoint: {agent_url[agent_id]} "
                f"(methods: {methods or 'none'}).",
                "tags": ["agent"],
            }
        )
    return {
        "name": "a2a-bus gateway",
        "description": "Every agent on this bus, each at its own A2A endpoint; this "
        'endpoint takes data parts {"method": ..., "params": ...} routed to the agent '
        "that declares the method.",
        **_interfaces(url),
        "version": "0.1.0",
        "capabilities": {
            "streaming": any(streams(m) for c in cards for m in c.get("methods", ())),
            "pushNotifications": True,
        },
        **_security(secured),
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": OUTPUT_MODES,
        "skills": skills,
    }
