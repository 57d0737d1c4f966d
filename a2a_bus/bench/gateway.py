"""Gateway throughput: JSON-RPC requests per second through ``POST /rpc`` to an in-memory
agent, beside a bare Starlette endpoint doing the same work (parse, call the bus, answer)
in the same run. Both are driven in-process through httpx's ASGI transport."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_bus.bench.report import Report, Row
from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.runtime import loops

TARGET = 0.5
BODY = orjson.dumps({"jsonrpc": "2.0", "method": "echo", "params": ["ping"], "id": 1})
CONCURRENCY = 32


class BenchEcho(Agent):
    agent_id = "bench-echo"
    mailbox_size = 256

    @method
    def echo(self, value: Any) -> Any:
        return value


def bare_app(bus: Bus) -> Starlette:
    """The least an endpoint can do: parse, call the bus, answer."""
    client = bus.async_client()

    async def rpc(request: Request) -> Response:
        answer = await client.call(orjson.loads(await request.body()))
        return Response(orjson.dumps(answer), media_type="application/json")

    return Starlette(routes=[Route("/rpc", rpc, methods=["POST"])])


async def _rate(app: Starlette, seconds: float) -> float:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
        loop = asyncio.get_running_loop()
        done = 0

        async def worker(until: float) -> None:
            nonlocal done
            while loop.time() < until:
                response = await http.post("/rpc", content=BODY)
                if response.status_code != 200 or response.json().get("result") != "ping":
                    raise RuntimeError(f"bad answer: {response.status_code} {response.text}")
                done += 1

        await asyncio.gather(*(worker(loop.time() + 0.1) for _ in range(CONCURRENCY)))  # warm-up
        done = 0
        start = time.perf_counter()
        await asyncio.gather(*(worker(loop.time() + seconds) for _ in range(CONCURRENCY)))
        return done / (time.perf_counter() - start)


async def _run(quick: bool) -> Report:
    seconds = 0.5 if quick else 2.0
    rounds = 2 if quick else 3
    report = Report("Gateway: JSON-RPC requests/s through POST /rpc (higher is better)")
    async with Bus.memory() as bus:
        await bus.aspawn(BenchEcho)
        gateway = create_app(bus, GatewaySettings())
        bare = bare_app(bus)
        best_gateway = best_bare = 0.0
        for _ in range(rounds):  # interleaved, so drift hits both alike
            best_bare = max(best_bare, await _rate(bare, seconds))
            best_gateway = max(best_gateway, await _rate(gateway, seconds))
    report.add(
        Row(
            f"gateway, {CONCURRENCY} concurrent clients",
            best_gateway,
            "req/s",
            best_bare,
            "bare Starlette endpoint",
            TARGET,
            higher_is_better=True,
        )
    )
    report.notes.append(
        "Both call the same in-memory bus and agent; the gateway adds validation per "
        "element, access checks, body limits and metrics."
    )
    return report


def run(quick: bool = False) -> Report:
    return loops.run(_run(quick))


if __name__ == "__main__":
    run().print()
