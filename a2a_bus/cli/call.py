"""``a2a-bus call``: one JSON-RPC call through a gateway (``--url``) or on Kafka (``--kafka``).

Also holds the options the other client commands (publish, tail, agents) share.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import orjson
import typer

from a2a_bus import loops
from a2a_bus.cli import app
from a2a_bus.gateway.remote import GatewayClient, GatewayError

T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8080"

UrlOption = Annotated[
    str,
    typer.Option("--url", envvar="A2A_GATEWAY_URL", help="Gateway base URL."),
]
KafkaOption = Annotated[
    str | None,
    typer.Option("--kafka", help="Go straight to Kafka at this bootstrap (no gateway)."),
]
TokenOption = Annotated[
    str | None,
    typer.Option("--token", envvar="A2A_GATEWAY_TOKEN", help="Bearer token for the gateway."),
]
PrefixOption = Annotated[str, typer.Option("--prefix", help="Topic prefix (with --kafka).")]


def parse_json(text: str, what: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint=what) from None


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def run_remote(url: str, token: str | None, action: Callable[[GatewayClient], Awaitable[T]]) -> T:
    """Run ``action`` against the gateway at ``url``; connection errors end the command."""

    async def go() -> T:
        async with GatewayClient(url, token=token) as gateway:
            return await action(gateway)

    try:
        return loops.run(go())
    except Exception as exc:
        raise gateway_failure(exc, url) from None


def gateway_failure(exc: Exception, url: str) -> BaseException:
    """What a command raises for ``exc``: a clean exit for gateway and connection
    errors, the exception itself for anything else."""
    if isinstance(exc, GatewayError):
        return fail(str(exc))
    if type(exc).__module__.startswith(("httpx", "httpcore")):
        return fail(f"cannot reach the gateway at {url}: {exc}")
    return exc


def run_on_kafka(bootstrap: str, prefix: str, action: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``action(bus)`` on a bus joined to Kafka (no agents hosted here)."""
    from a2a_bus.bus import Bus

    async def go() -> T:
        async with Bus.kafka(bootstrap, bus_options={"prefix": prefix}) as bus:
            return await action(bus)

    return loops.run(go())


def default_url() -> str:
    return os.environ.get("A2A_GATEWAY_URL", DEFAULT_URL)


@app.command()
def call(
    method: Annotated[str, typer.Argument(help="JSON-RPC method, e.g. tools/call.")],
    params: Annotated[
        str | None, typer.Argument(metavar="[PARAMS_JSON]", help="Params: a JSON array or object.")
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent id (default: by method).")
    ] = None,
    notify: Annotated[bool, typer.Option("--notify", help="Send a notification.")] = False,
    url: UrlOption = DEFAULT_URL,
    kafka: KafkaOption = None,
    token: TokenOption = None,
    prefix: PrefixOption = "a2a",
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the answer.")] = 30.0,
) -> None:
    """Call METHOD and print the JSON-RPC response; exit 1 when it is an error."""
    value = parse_json(params, "PARAMS_JSON") if params is not None else None
    if value is not None and not isinstance(value, dict | list):
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
    if kafka:

        async def on_bus(bus: Any) -> Any:
            return await bus.async_client().call(message, timeout=timeout)

        response = run_on_kafka(kafka, prefix, on_bus)
    else:
        response = run_remote(url, token, lambda gateway: gateway.rpc(message))
    if response is None:
        return
    print_json(response)
    if isinstance(response, dict) and "error" in response:
        raise typer.Exit(1)
