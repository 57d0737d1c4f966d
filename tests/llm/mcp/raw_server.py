"""A tiny misbehaving MCP stdio server written without the SDK, for the tests: it
answers the handshake and ``tools/list``, and every ``tools/call`` as ``MODE`` says.

Modes: ``mute`` (answers nothing, not even the handshake), ``refuse`` (a JSON-RPC
error -32000 with data), ``silent`` (no answer), ``unknown-content`` (a content block
of a type MCP does not have), ``huge`` (a text of ``HUGE_BYTES`` characters),
``twins`` (lists two tools named ``t``; calls answer "ok"), ``bad-schemas`` (lists ``t``
and tools whose input schemas are wrong; calls answer "ok"), ``patterns`` (lists tools
whose schemas hold regular expressions that backtrack for ever; calls answer "ok").
A second argument ``2026`` makes it a 2026-era server (it answers ``server/discover``);
it is handshake-era otherwise.
"""

from __future__ import annotations

import json
import sys
from typing import Any

HUGE_BYTES = 1_500_000
SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}}
#: Input schemas the SDK or JSON Schema refuses, by tool name.
BAD_SCHEMAS: dict[str, Any] = {
    "typed": {"type": 5},
    "listed": {"type": "object", "properties": []},
    "bare": 5,
    "unparsable": {"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}},
}
#: A regular expression Python's ``re`` takes exponential time to refuse "aaa...!" with.
HOSTILE = "^(a+)+$"
PATTERN_SCHEMAS: dict[str, Any] = {
    "t": {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": HOSTILE}},
        "patternProperties": {HOSTILE: {"type": "integer"}},
        "additionalProperties": False,
    },
    "u": {
        "type": "object",
        "allOf": [{"patternProperties": {HOSTILE: {"type": "integer"}}}],
        "unevaluatedProperties": False,
    },
}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tools(mode: str) -> list[dict[str, Any]]:
    if mode == "patterns":
        return [{"name": name, "inputSchema": schema} for name, schema in PATTERN_SCHEMAS.items()]
    listed = [{"name": "t", "description": "the first t", "inputSchema": SCHEMA}]
    if mode == "bad-schemas":
        listed += [{"name": name, "inputSchema": schema} for name, schema in BAD_SCHEMAS.items()]
    if mode == "twins":
        listed.append({"name": "t", "description": "the second t", "inputSchema": SCHEMA})
    return listed


def answer_call(mode: str, request_id: Any, extra: dict[str, Any]) -> None:
    if mode == "silent":
        return
    if mode == "refuse":
        error = {"code": -32000, "message": "quota used up", "data": {"retry_in": 60}}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
        return
    if mode == "unknown-content":
        result: dict[str, Any] = {"content": [{"type": "video", "url": "x"}]}
    elif mode == "huge":
        result = {"content": [{"type": "text", "text": "y" * HUGE_BYTES}]}
    else:
        result = {"content": [{"type": "text", "text": "ok"}]}
    send({"jsonrpc": "2.0", "id": request_id, "result": {**result, **extra}})


#: What every result of a 2026-era server carries.
MODERN_RESULT = {"resultType": "complete", "ttlMs": 0, "cacheScope": "public"}


def main() -> None:
    mode = sys.argv[1]
    modern = sys.argv[2:] == ["2026"]
    extra = MODERN_RESULT if modern else {}
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None or mode == "mute":
            continue  # a notification, or a server that hung
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "0"},
            }
        elif method == "server/discover" and modern:
            result = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "0"},
                **MODERN_RESULT,
            }
        elif method == "tools/list":
            result = {"tools": tools(mode), **extra}
        elif method == "tools/call":
            answer_call(mode, request_id, extra)
            continue
        else:
            error = {"code": -32601, "message": "Method not found"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
