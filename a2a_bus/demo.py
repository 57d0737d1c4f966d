"""A short scripted multi-agent session: discovery, P2P, routing by method,
fan-out, late-joiner replay, streaming both ways, batches, an LLM agent (scripted
model, no key) that calls another agent and answers events, an LLM agent that uses
an MCP server's tool and is woken by a schedule, and the counters.

Runs on the in-memory transport (default) or on Kafka (``--kafka BOOTSTRAP``);
``python -m a2a_bus.demo`` or ``a2a-bus demo``. The agents are the package's own
examples (:mod:`a2a_bus.examples`), so the demo runs wherever the package is installed.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from a2a_bus import Agent, Bus, Call, Client, JsonRpcError
from a2a_bus.examples import almanac, concierge, news
from a2a_bus.examples.calculator import Calculator
from a2a_bus.examples.echo import Echo
from a2a_bus.llm import LlmClient
from a2a_bus.settings import bus_environment


def _wait(check: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def fresh_prefix() -> str:
    """A topic prefix of its own per run: fresh topics, no history of earlier runs."""
    return f"demo{uuid.uuid4().hex[:8]}"


def demo_bus(kafka: str | None = None) -> Bus:
    """In memory; or on Kafka at ``kafka``, every other setting (``A2A_KAFKA_*``, SASL
    and SSL too, ``A2A_REQUEST_TIMEOUT``...) read by ``Bus.from_env``, on a fresh prefix."""
    if not kafka:
        return Bus.memory()
    return Bus.from_env(bus_environment(kafka, fresh_prefix()))


def run(
    kafka: str | None = None,
    console: Console | None = None,
    *,
    bus: Bus | None = None,
    calculator: type[Agent] = Calculator,
    model: LlmClient | None = None,
) -> int:
    """Run the session on ``bus`` (default: :func:`demo_bus` of ``kafka``); 0 when
    every step gave the expected answer. ``calculator`` and the concierge's ``model``
    (default: its scripted one) can be swapped to see a wrong answer fail a step."""
    out = console or Console()
    # The scripted model unless one is given, even when the environment names a real
    # one: the demo checks exact answers.
    llm_agent = concierge.concierge_class(model or concierge.scripted_client())
    if bus is None:
        bus = demo_bus(kafka)
    failures: list[str] = []

    def check(label: str, got: Any, expected: Any) -> None:
        ok = got == expected
        mark = "[green]ok[/green]" if ok else f"[red]expected {escape(repr(expected))}[/red]"
        out.print(f"  {escape(label)} -> [bold]{escape(repr(got))}[/bold]  {mark}")
        if not ok:
            failures.append(label)

    bus.spawn(calculator, replicas=2)
    bus.spawn(Echo)
    bus.spawn(news.NewsDesk)
    bus.spawn(news.SportsFan)
    bus.spawn(news.NewsJunkie)
    bus.spawn(llm_agent)
    bus.spawn(concierge.DigestReader)
    almanac_agent = almanac.almanac_class(almanac.scripted_client())
    bus.spawn(almanac_agent)
    transport = f"Kafka at {kafka}" if kafka else "the in-memory transport"
    out.rule(f"a2a-bus demo on {transport}")
    with bus:
        client: Client = bus.client()

        out.print("[bold cyan]Discovery[/bold cyan]: methods/list")
        table = Table("agent", "method", "params", "streaming")
        for entry in client.request(None, "methods/list")["methods"]:
            params = ", ".join(entry["params"]["properties"])
            table.add_row(entry["agent"], entry["name"], params, entry.get("streaming", ""))
        out.print(table)
        card = client.request(None, "agent/card/get", {"agentId": "calc"})
        check("agent/card/get calc: replicas", card["replicas"], 2)

        out.print("[bold cyan]Point-to-point[/bold cyan]")
        check("calc.subtract(42, 23)", client.request("calc", "subtract", [42, 23]), 19)
        check("echo.shout('hello')", client.request("echo", "shout", {"text": "hello"}), "HELLO")

        out.print("[bold cyan]Routed by method[/bold cyan] (no agent named)")
        check("multiply(6, 7)", client.request(None, "multiply", [6, 7]), 42)
        bad_calls: list[tuple[str, str | None, str, Any]] = [
            ("divide(1, 0)", "calc", "divide", [1, 0]),
            ("no/such/method", None, "no/such/method", {}),
            ("subtract('a', 1)", "calc", "subtract", ["a", 1]),
        ]
        for label, agent, method_name, params in bad_calls:
            try:
                client.request(agent, method_name, params)
                check(label, "no error", "an error")
            except JsonRpcError as exc:
                check(f"{label} error", (exc.code, exc.message), _expected_error(label))

        out.print("[bold cyan]Pub/sub fan-out[/bold cyan]: one publish, every subscriber")
        client.request("newsdesk", "publish", {"section": "sports", "headline": "Home win"})
        client.request("newsdesk", "publish", {"section": "tech", "headline": "New chip"})
        _wait(lambda: len(client.request("news-junkie", "read")) >= 2)
        _wait(lambda: len(client.request("sports-fan", "read")) >= 1)
        check("sports-fan read", client.request("sports-fan", "read"), ["news.sports: Home win"])
        check(
            "news-junkie read",
            sorted(client.request("news-junkie", "read")),
            [
                "news.sports: Home win",
                "news.tech: New chip",
            ],
        )

        out.print("[bold cyan]Late joiner[/bold cyan]: the archivist replays retained history")
        bus.spawn(news.Archivist)
        _wait(lambda: len(client.request("archivist", "read")) >= 2)
        check(
            "archivist read",
            sorted(client.request("archivist", "read")),
            [
                "news.sports: Home win",
                "news.tech: New chip",
            ],
        )

        out.print("[bold cyan]Streaming[/bold cyan]: agent -> caller and caller -> agent")
        chunks = list(client.stream("calc", "count", {"to": 10}))
        check("calc.count(to=10) chunks", chunks, list(range(1, 11)))
        check("calc.sum(stream of 1..100)", client.stream_to("calc", "sum", range(1, 101)), 5050)

        out.print("[bold cyan]Batch[/bold cyan]")
        results = client.batch([Call("calc", "add", [1, 2]), Call(None, "shout", ["hi"])])
        check("batch [add(1,2), shout('hi')]", results, [3, "HI"])

        out.print("[bold cyan]LLM agent on the bus[/bold cyan]: the concierge (scripted model)")
        _llm_step(client, llm_agent, out, check)

        out.print("[bold cyan]MCP tool and a schedule[/bold cyan]: the almanac (scripted model)")
        _almanac_step(client, almanac_agent, check)

        out.print("[bold cyan]Counters[/bold cyan]")
        counters = bus.metrics.snapshot()
        out.print({k: v for k, v in counters.items() if v})
    out.rule("[green]all steps ok[/green]" if not failures else f"[red]failed: {failures}[/red]")
    return 0 if not failures else 1


def _llm_step(
    client: Client, llm_agent: Any, out: Console, check: Callable[[str, Any, Any], None]
) -> None:
    """chat (a tool call to another agent), chat/stream, and an event trigger."""
    question = "what is 42 - 23?"
    try:
        answer = client.request("concierge", "chat", {"message": question, "session_id": "demo"})
    except JsonRpcError as exc:
        answer = f"error {exc.code}: {exc.message}"
    # The conversation is kept in the loop's store: it shows the tool call and its result.
    conversation = llm_agent.loop.store.load("session:demo")
    expected_call = "call_agent: calc.subtract[42, 23] -> 19"
    check("concierge tool call", _tool_calls(conversation), [expected_call])
    check(f"concierge.chat({question!r})", answer, "42 - 23 = 19")

    out.print("  chat/stream('what is 6 * 7?') chunks:")
    chunks: list[dict[str, Any]] = []
    try:
        for chunk in client.stream("concierge", "chat/stream", {"message": "what is 6 * 7?"}):
            out.print(f"    [dim]{escape(_chunk_line(chunk))}[/dim]")
            chunks.append(chunk)
    except JsonRpcError as exc:
        out.print(f"    [red]error {exc.code}: {escape(exc.message)}[/red]")
    kinds = [chunk.get("type") for chunk in chunks]
    steps = [kind for i, kind in enumerate(kinds) if i == 0 or kinds[i - 1] != kind]
    check("chat/stream chunk types", steps, ["tool_start", "tool_end", "token", "done"])
    tokens = "".join(str(chunk.get("text")) for chunk in chunks if chunk.get("type") == "token")
    check("chat/stream tokens joined", tokens, "6 * 7 = 42")
    done = chunks[-1].get("content") if chunks else None
    check("chat/stream done content", done, "6 * 7 = 42")

    headline = {"section": "tech", "headline": "Quantum chip ships"}
    event_id = client.request("newsdesk", "publish", headline)

    def digest() -> dict[str, Any] | None:
        for data in client.request("digest-reader", "read"):
            if isinstance(data, dict) and (data.get("trigger") or {}).get("id") == event_id:
                return data
        return None

    _wait(lambda: digest() is not None)
    published = digest() or {}
    expected_answer = "Tech in brief: Quantum chip ships"
    check("trigger news.tech: answer", published.get("answer"), expected_answer)
    check("trigger conversation", published.get("conversation"), f"trigger:{event_id}")


def _almanac_step(client: Client, agent: Any, check: Callable[[str, Any, Any], None]) -> None:
    """chat (a tool of the units MCP server), then a tick of its schedule answered."""
    question = "how many mi is 42 km?"
    try:
        answer = client.request("almanac", "chat", {"message": question, "session_id": "demo"})
    except JsonRpcError as exc:
        answer = f"error {exc.code}: {exc.message}"
    conversation = agent.loop.store.load("session:demo")
    called = [call.name for message in conversation for call in message.tool_calls]
    check("almanac MCP tool call", called, [almanac.TOOL])
    check(f"almanac.chat({question!r})", answer, "42 km = 26.098 mi")

    def check_in() -> dict[str, Any] | None:
        for data in client.request("digest-reader", "read"):
            trigger = data.get("trigger") if isinstance(data, dict) else None
            if str((trigger or {}).get("id", "")).startswith(f"{almanac.CLOCK}@"):
                return data
        return None

    _wait(lambda: check_in() is not None)
    note = check_in() or {}
    tick = str((note.get("trigger") or {}).get("id", "")).split("@", 1)[-1]
    check("schedule almanac-clock woke the almanac", note.get("agent"), "almanac")
    check("its check-in", note.get("answer"), f"Check-in at tick {tick}")


def _chunk_line(chunk: dict[str, Any]) -> str:
    """One stream chunk, short."""
    kind = chunk.get("type")
    if kind == "token":
        return f"token {chunk.get('text')!r}"
    if kind == "tool_start":
        return f"tool_start {chunk.get('tool_name')}"
    if kind == "tool_end":
        return f"tool_end {chunk.get('tool_name')} success={chunk.get('success')}"
    if kind == "done":
        return f"done {chunk.get('content')!r} turns_used={chunk.get('turns_used')}"
    return json.dumps(chunk)


def _tool_calls(conversation: list[Any]) -> list[str]:
    """Each call_agent call of a conversation, with the result the bus returned."""
    results = {m.tool_call_id: m.content for m in conversation if m.role == "tool"}
    lines = []
    for message in conversation:
        for call in message.tool_calls:
            arguments = json.loads(call.arguments)
            target = f"{arguments.get('agent')}.{arguments.get('method')}{arguments.get('params')}"
            lines.append(f"{call.name}: {target} -> {results.get(call.id)}")
    return lines


def _expected_error(label: str) -> tuple[int, str]:
    if label.startswith("divide"):
        return (-32010, "Division by zero")
    if label.startswith("no/such"):
        return (-32601, "Method not found")
    return (-32602, "Invalid params")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m a2a_bus.demo", description=__doc__)
    parser.add_argument("--kafka", metavar="BOOTSTRAP", help="run on Kafka instead of in memory")
    args = parser.parse_args(argv)
    return run(args.kafka)


if __name__ == "__main__":
    raise SystemExit(main())
