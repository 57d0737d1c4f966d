"""``a2a-bus serve``: host agents on a bus and serve the HTTP gateway (and the Kafka ingress)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
import uvicorn
from rich.console import Console

from a2a_bus import loops
from a2a_bus.agent import Agent
from a2a_bus.cli import app
from a2a_bus.gateway import GatewaySettings, create_app, load_tokens

AGENT_FILE_SUFFIXES = (".yaml", ".yml", ".toml")


def load_target(target: str) -> type[Agent]:
    """``module:Class``, ``path/to/file.py:Class`` or an agent file -> an Agent class."""
    if target.endswith(AGENT_FILE_SUFFIXES):
        return _agent_file(Path(target))
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise typer.BadParameter(
            f"{target!r}: use module:Class, path/to/file.py:Class or an agent file",
            param_hint="TARGET",
        )
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise typer.BadParameter(f"no such file: {where}", param_hint="TARGET")
        module_name = f"_a2a_serve_{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            detail = f"cannot import {where!r}: {exc}"
            raise typer.BadParameter(detail, param_hint="TARGET") from None
    found = getattr(module, name, None)
    if not (isinstance(found, type) and issubclass(found, Agent)):
        raise typer.BadParameter(f"{target!r} is not an Agent subclass", param_hint="TARGET")
    return found


def _agent_file(path: Path) -> type[Agent]:
    try:
        from a2a_bus.llm.bus_agent import agent_class_from_file  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise typer.BadParameter(
            f"{path}: agent files need a2a_bus.llm (a2a_bus.llm.bus_agent is not available)",
            param_hint="TARGET",
        ) from None
    if not path.is_file():
        raise typer.BadParameter(f"no such file: {path}", param_hint="TARGET")
    try:
        agent_cls: type[Agent] = agent_class_from_file(path)
    except Exception as exc:  # the file's own error, without a traceback
        raise typer.BadParameter(f"{path}: {exc}", param_hint="TARGET") from None
    return agent_cls


def _host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise typer.BadParameter(f"{value!r}: use HOST:PORT", param_hint="--http")
    return host, int(port)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: ``serve`` stops it on SIGINT/SIGTERM and
    then shuts the bus down cleanly (uvicorn would re-raise the signal afterwards)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _serve(
    classes: list[type[Agent]],
    bootstrap: str | None,
    host: str,
    port: int,
    replicas: int,
    prefix: str,
    settings: GatewaySettings,
    console: Console,
) -> None:
    from a2a_bus.bus import Bus
    from a2a_bus.ingress import Ingress

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    bus = (
        Bus.kafka(bootstrap, bus_options={"prefix": prefix})
        if bootstrap
        else Bus.memory(prefix=prefix)
    )
    async with bus:
        for agent_cls in classes:
            await bus.aspawn(agent_cls, replicas)
        ingress = Ingress(bus) if bootstrap else None
        if ingress is not None:
            await ingress.start()
        config = uvicorn.Config(
            create_app(bus, settings), host=host, port=port, log_level="warning", lifespan="on"
        )
        server = _Server(config)
        serving = asyncio.create_task(server.serve())
        while not server.started and not serving.done():
            await asyncio.sleep(0.02)
        if not server.started:
            console.print(f"[red]error:[/] cannot serve HTTP on {host}:{port}")
            raise typer.Exit(1)
        bound = server.servers[0].sockets[0].getsockname()[1]
        names = ", ".join(cls.agent_id for cls in classes)
        transport = f"Kafka at {bootstrap}" if bootstrap else "in-memory transport"
        console.print(f"a2a-bus: serving {names} ({replicas} replica(s) each) on {transport}")
        console.print(f"a2a-bus: HTTP gateway listening on http://{host}:{bound}")
        if ingress is not None:
            console.print(f"a2a-bus: Kafka ingress on topic {ingress.topic}")
        sys.stdout.flush()
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        console.print("a2a-bus: shutting down")
        server.should_exit = True
        await serving
        stopping.cancel()
        if ingress is not None:
            await ingress.stop()
    console.print("a2a-bus: stopped")


@app.command()
def serve(
    targets: Annotated[
        list[str],
        typer.Argument(
            metavar="TARGET...",
            help="module:Class, path/to/file.py:Class, or an agent file (.yaml/.toml).",
        ),
    ],
    kafka: Annotated[
        str | None,
        typer.Option(
            "--kafka",
            envvar="KAFKA_BOOTSTRAP_SERVERS",
            help="Kafka bootstrap servers (default: the in-memory transport).",
        ),
    ] = None,
    http: Annotated[str, typer.Option("--http", help="HOST:PORT of the gateway.")] = (
        "127.0.0.1:8080"
    ),
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Actors per agent.")] = 1,
    prefix: Annotated[str, typer.Option("--prefix", help="Topic prefix.")] = "a2a",
    tokens: Annotated[
        Path | None,
        typer.Option("--tokens", help="YAML/JSON file: bearer token -> allow-lists."),
    ] = None,
) -> None:
    """Host agents and serve the HTTP gateway (plus the raw JSON-RPC ingress with --kafka)."""
    classes = [load_target(target) for target in targets]
    host, port = _host_port(http)
    overrides: dict[str, Any] = {}
    if tokens is not None:
        try:
            overrides["tokens"] = load_tokens(tokens)
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--tokens") from None
    settings = GatewaySettings.from_env(**overrides)
    console = Console(highlight=False)
    loops.run(_serve(classes, kafka, host, port, replicas, prefix, settings, console))
