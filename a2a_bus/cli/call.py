"""``a2a-bus call``: one JSON-RPC call through a gateway (``--url``) or on Kafka (``--kafka``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any

import httpx
import typer

from a2a_bus.cli.app import app
from a2a_bus.cli.common import (
    DEFAULT_URL,
    KafkaOption,
    PrefixOption,
    TokenOption,
    UrlOption,
    fail,
    parse_json,
    print_json,
    run_on_kafka,
    run_remote,
)
from a2a_bus.cli.http_client import GatewayClient
from a2a_bus.core.timeouts import timeout_response
from a2a_bus.protocol import JsonRpcError

if TYPE_CHECKING:
    from a2a_bus.bus import Bus


def _message(method: str, params: str | None, agent: str | None, notify: bool) -> dict[str, Any]:
    value = parse_json(params, "PARAMS_JSON") if params is not None else None
    if params is not None and not isinstance(value, dict | list):  # null too: no params
        raise typer.BadParameter("params must be a JSON array or object", param_hint="PARAMS_JSON")
    if agent is not None:
        if isinstance(value, list):
            raise typer.BadParameter("--agent needs named params (a JSON object) or none")
        value = {**(value or {}), "_agentId": agent}
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if value is not None:
        message["params"] = value
    if not notify:
        message["id"] = 1
    return message


@app.command()
def call(
    method: Annotated[
        str, typer.Argument(metavar="METHOD", help="JSON-RPC method, e.g. tools/call.")
    ],
    params: Annotated[
        str | None, typer.Argument(metavar="PARAMS_JSON", help="Params: a JSON array or object.")
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent id (default: by method).")
    ] = None,
    notify: Annotated[bool, typer.Option("--notify", help="Send a notification.")] = False,
    url: UrlOption = DEFAULT_URL,
    kafka: KafkaOption = None,
    token: TokenOption = None,
    prefix: PrefixOption = None,
    timeout: Annotated[
        float,
        typer.Option(
            help="Seconds to wait for the answer (a gateway also holds a call to its own "
            "A2A_GATEWAY_REQUEST_TIMEOUT)."
        ),
    ] = 30.0,
) -> None:
    """Call METHOD and print the JSON-RPC response; exit 1 when it is an error."""
    if not (timeout > 0 and math.isfinite(timeout)):
        raise typer.BadParameter("must be a positive number of seconds", param_hint="--timeout")
    message = _message(method, params, agent, notify)
    if kafka:

        async def on_bus(bus: Bus) -> Any:
            try:
                return await bus.async_client().call(message, timeout=timeout)
            except JsonRpcError as exc:  # a notification the bus refused to send
                raise fail(f"not sent: {exc}") from None

        response = run_on_kafka(kafka, prefix, on_bus)
    else:

        async def on_gateway(gateway: GatewayClient) -> Any:
            try:
                return await gateway.rpc(message)
            except httpx.TimeoutException:  # the same answer a bus gives a late reply
                return {**timeout_response(timeout), "id": message.get("id")}

        response = run_remote(url, token, on_gateway, timeout=timeout)
    if response is None:
        return
    print_json(response)
    if isinstance(response, dict) and "error" in response:
        raise typer.Exit(1)
