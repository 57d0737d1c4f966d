"""The gateway behind a real uvicorn server on 127.0.0.1: SSE streams, client
disconnects, and many concurrent clients that all use the same JSON-RPC id."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest
import uvicorn

from a2a_bus import Agent, method
from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from tests.buses import eventually

from . import agents

pytestmark = pytest.mark.timeout(120)

WAIT = 20.0


@pytest.fixture
async def url(bus: Bus, settings: GatewaySettings) -> AsyncIterator[str]:
    config = uvicorn.Config(
        create_app(bus, settings), host="127.0.0.1", port=0, log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    await eventually(lambda: server.started or serving.done(), "uvicorn to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await asyncio.wait_for(serving, WAIT)


def parse_sse(text: str) -> list[dict[str, Any]]:
    """SSE frames as dicts of field -> value (data decoded from JSON)."""
    frames = []
    for block in text.strip().split("\n\n"):
        frame: dict[str, Any] = {}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            frame[name] = orjson.loads(value) if name == "data" else value
        frames.append(frame)
    return frames


def request(method: str, params: Any, id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params, "id": id}


async def test_sse_stream_of_100_chunks_in_order(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        response = await http.post(
            "/rpc",
            json=request("count", {"n": 100}, id="s1"),
            headers={"accept": "text/event-stream"},
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = parse_sse(response.text)
    chunks, end = frames[:-1], frames[-1]
    assert [f["event"] for f in chunks] == ["chunk"] * 100
    assert [int(f["id"]) for f in chunks] == list(range(100))
    assert [f["data"] for f in chunks] == [
        {"jsonrpc": "2.0", "result": n, "id": "s1"} for n in range(100)
    ]
    assert end["event"] == "end"
    assert end["data"] == {"jsonrpc": "2.0", "result": {"chunks": 100}, "id": "s1"}


async def test_streaming_method_without_sse_answers_with_the_list(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        response = await http.post("/rpc", json=request("count", {"n": 5}))
    assert response.json() == {"jsonrpc": "2.0", "result": [0, 1, 2, 3, 4], "id": 1}


async def test_sse_error_ends_the_stream_with_an_error_event(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        response = await http.post(
            "/rpc",
            json=request("count", {"n": "many"}),
            headers={"accept": "text/event-stream"},
        )
    (frame,) = parse_sse(response.text)
    assert frame["event"] == "error"
    assert frame["data"]["error"]["code"] == -32602


async def test_client_disconnect_cancels_the_stream_upstream(url: str, bus: Bus) -> None:
    assert bus.metrics.in_flight == 0
    async with (
        httpx.AsyncClient(base_url=url, timeout=WAIT) as http,
        http.stream(
            "POST",
            "/rpc",
            json=request("count", {"n": 400, "pause": 0.005}),
            headers={"accept": "text/event-stream"},
        ) as response,
    ):
        lines = response.aiter_lines()
        data = [line async for line in _take_data(lines, 3)]
        assert [orjson.loads(d)["result"] for d in data] == [0, 1, 2]
        assert bus.metrics.in_flight == 1
    # The connection is gone: the gateway closes the bus stream, which forgets the
    # request and tells the agent to stop.
    await eventually(lambda: bus.metrics.in_flight == 0, "the stream to be cancelled")
    # Echo handles one message at a time: this answer comes after the generator ended.
    async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        answer = await http.post("/rpc", json=request("echo", ["after"]))
    assert answer.json()["result"] == "after"
    assert agents.COUNTED["last"] < 399, "the generator ran to its end"


async def _take_data(lines: AsyncIterator[str], count: int) -> AsyncIterator[str]:
    taken = 0
    async for line in lines:
        if line.startswith("data: "):
            yield line[len("data: ") :]
            taken += 1
            if taken == count:
                return


@pytest.mark.parametrize(
    ("params", "id", "said"),
    [
        ({"n": 2, "pause": 0, "x": "x" * 1_000_000}, 1, "params is 1000"),
        ({"n": 2}, "i" * 20_000, "the attributes of the event are"),
    ],
)
async def test_a_streaming_request_no_transport_carries_is_refused_as_without_sse(
    url: str, params: Any, id: Any, said: str
) -> None:
    """Accept: text/event-stream changes how the answer comes, not what is checked:
    params over the payload bound or an id over the envelope's are -32005 either way."""
    async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        for accept in ("text/event-stream", "application/json"):
            response = await http.post(
                "/rpc", json=request("count", params, id=id), headers={"accept": accept}
            )
            assert response.headers["content-type"].startswith("application/json")
            error = response.json()["error"]
            assert error["code"] == -32005 and said in error["data"], error


class _Teller(Agent):
    agent_id = "teller"

    @method
    def words(self, topic: str) -> Iterator[str]:
        yield from topic.split()


@pytest.mark.kafka
@pytest.mark.timeout(300)
async def test_a_stream_refused_on_its_way_ends_with_an_error_event(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The agent's topic takes records of at most 2,000 bytes (a cluster's
    max.message.bytes below the bus's bounds): the broker refuses the request after
    the SSE answer began, and the client gets an error event, not a torn stream."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    uid = uuid.uuid4().hex[:10]
    options = {"prefix": f"t{uid}", "heartbeat": 60.0, "request_timeout": WAIT}
    made = Bus.kafka(kafka_bootstrap, bus_options=options, metadata_max_age_ms=1000)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await asyncio.wait_for(admin.start(), WAIT)
    try:
        limits = {"max.message.bytes": "2000"}
        small = NewTopic(made.topics.agent("teller"), 1, 1, topic_configs=limits)
        await asyncio.wait_for(admin.create_topics([small]), WAIT)
    finally:
        await admin.close()
    made.spawn(_Teller)
    async with made:
        config = uvicorn.Config(
            create_app(made, GatewaySettings(request_timeout=WAIT)),
            host="127.0.0.1",
            port=0,
            log_level="warning",
        )
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve())
        await eventually(lambda: server.started or serving.done(), "uvicorn to start")
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
                response = await http.post(
                    "/rpc",
                    json=request("words", {"topic": "word " * 1000}, id="w"),
                    headers={"accept": "text/event-stream"},
                )
        finally:
            server.should_exit = True
            await asyncio.wait_for(serving, WAIT)
    (frame,) = parse_sse(response.text)
    assert frame["event"] == "error"
    assert frame["data"]["id"] == "w"
    assert frame["data"]["error"]["code"] == -32005
    # No error but aiokafka's own (a group coordinator that moved meanwhile, say).
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert not [r for r in errors if not r.name.startswith("aiokafka")]


async def test_200_concurrent_clients_with_the_same_id_get_their_own_answers(url: str) -> None:
    async def one(n: int) -> Any:
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
            response = await http.post("/rpc", json=request("echo", [f"client-{n}"], id=1))
            return response.json()

    answers = await asyncio.gather(*(one(n) for n in range(200)))
    assert answers == [{"jsonrpc": "2.0", "result": f"client-{n}", "id": 1} for n in range(200)]


async def test_health_readiness_agents_and_metrics(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        assert (await http.get("/readyz")).status_code == 200
        await http.post("/rpc", json=request("nope", [], id=7))
        cards = (await http.get("/agents")).json()["agents"]
        assert {"echo", "spec", "secret"} <= {card["id"] for card in cards}
        echo = (await http.get("/agents/echo")).json()
        assert {m["name"] for m in echo["methods"]} == {"echo", "count"}
        assert (await http.get("/agents/nobody")).status_code == 404
        text = (await http.get("/metrics")).text
    assert 'a2a_gateway_http_requests_total{route="/rpc",status="200"}' in text
    assert 'a2a_gateway_rpc_errors_total{code="-32601"}' in text
    assert "a2a_gateway_http_request_seconds_bucket" in text
    assert "a2a_gateway_http_in_flight" in text
    assert "a2a_dead_letters_total" in text
    assert "a2a_transport_dead_letters" in text
    assert "a2a_transport_redelivered_total 0.0" in text  # in memory: none
    assert "# TYPE a2a_consumer_lag gauge" in text
