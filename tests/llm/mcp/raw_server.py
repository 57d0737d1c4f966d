"""A tiny misbehaving MCP stdio server written without the SDK, for the tests: it
answers the handshake and ``tools/list``, and every ``tools/call`` as ``MODE`` says.

Modes: ``mute`` (answers nothing, not even the handshake), ``refuse`` (a JSON-RPC
error -32000 with data), ``silent`` (no answer), ``unknown-content`` (a content block
of a type MCP does not have), ``huge`` (a text of ``HUGE_BYTES`` characters),
``twins`` (lists two tools named ``t``; calls answer "ok").
"""

from __future__ import annotations

import json
import sys
from typing import Any

HUGE_BYTES = 1_500_000
SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tools(mode: str) -> list[dict[str, Any]]:
    listed = [{"name": "t", "description": "the first t", "inputSchema": SCHEMA}]
    if mode == "twins":
        listed.append({"name": "t", "description": "the second t", "inputSchema": SCHEMA})
    return listed


def answer_call(mode: str, request_id: Any) -> None:
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
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main() -> None:
    mode = sys.argv[1]
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
        elif method == "tools/list":
            result = {"tools": tools(mode)}
        elif method == "tools/call":
            answer_call(mode, request_id)
            continue
        else:
            error = {"code": -32601, "message": "Method not found"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
