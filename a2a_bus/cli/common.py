"""What the ``a2a-bus`` commands share: their options, their output, how they reach
a gateway or Kafka, and how a failure becomes one line on stderr and an exit code
(0 done, 1 failed, 2 bad usage)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import orjson
import typer
from rich.console import Console

from a2a_bus import protocol
from a2a_bus.cli.http_client import GatewayClient, GatewayError, check_token, check_url
from a2a_bus.cli.signals import run_async
from a2a_bus.protocol import ErrorCode, ProtocolError
from a2a_bus.runtime.env import EnvError
from a2a_bus.settings import bus_environment
from a2a_bus.transport.kafka.config import bootstrap_problem

if TYPE_CHECKING:
    from a2a_bus.bus import Bus

T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8080"

UrlOption = Annotated[
    str,
    typer.Option("--url", envvar="A2A_GATEWAY_URL", help="Gateway base URL."),
]
KafkaOption = Annotated[
    str | None,
    typer.Option(
        "--kafka",
        metavar="BOOTSTRAP",
        help="Go straight to Kafka at these bootstrap servers (no gateway); the other "
        "A2A_KAFKA_* settings (SASL/SSL too) come from the environment.",
    ),
]


def _sendable_token(token: str | None) -> str | None:
    """The ``--token`` callback: a token no HTTP header can carry is bad usage (exit 2)."""
    if token:
        try:
            check_token(token)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return token


TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="A2A_GATEWAY_TOKEN",
        callback=_sendable_token,
        help="Bearer token for the gateway.",
    ),
]
PrefixOption = Annotated[
    str | None,
    typer.Option("--prefix", help="Topic prefix with --kafka (default: A2A_PREFIX, else a2a)."),
]


def console() -> Console:
    """A console for lines of data: never wrapped at the terminal's width (a pipe
    would get 80 columns) and without guessed highlighting."""
    return Console(highlight=False, soft_wrap=True)


class StatusConsole(Console):
    """The console of a server's status lines (never wrapped, as :func:`console`).

    A stdout closed by its reader (``| head -1``) makes it quiet and sets
    :attr:`closed`, where rich raises SystemExit: that would leave the event loop in
    the middle of an HTTP server's work (with tracebacks) instead of stopping it."""

    def __init__(self) -> None:
        super().__init__(highlight=False, soft_wrap=True)
        self.closed = False

    def on_broken_pipe(self) -> None:
        self.quiet = self.closed = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the flush at exit writes nowhere, as in rich
        os.close(devnull)


def plural(count: int, noun: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def parse_json(text: str, what: str) -> Any:
    """``text`` as JSON, as the bus parses what it receives (so an integer it cannot
    carry is refused here, not turned into another number)."""
    try:
        return protocol.parse_json(text.encode())
    except ProtocolError as exc:
        failure = exc.failure
        problem = "not JSON" if failure.code == ErrorCode.PARSE_ERROR else "refused"
        raise typer.BadParameter(f"{problem}: {failure.data}", param_hint=what) from None


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on stderr; the exit to raise (1: failed, 2: bad usage)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def run_remote(
    url: str,
    token: str | None,
    action: Callable[[GatewayClient], Awaitable[T]],
    timeout: float = 60.0,
) -> T:
    """Run ``action`` against the gateway at ``url``; connection errors end the command."""

    gateway_url(url)

    async def go() -> T:
        async with GatewayClient(url, token=token, timeout=timeout) as gateway:
            return await action(gateway)

    try:
        return run_async(go())
    except Exception as exc:
        raise gateway_failure(exc, url) from None


def gateway_url(url: str) -> str:
    """``url`` checked before anything is sent there: one no request can go to is bad
    usage (exit 2). Checked where it is used, so a bad ``A2A_GATEWAY_URL`` does not
    stop a command that goes to Kafka."""
    try:
        return check_url(url)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--url (or A2A_GATEWAY_URL)") from None


def gateway_failure(exc: Exception, url: str) -> BaseException:
    """What a command raises for ``exc``: a clean exit for gateway and connection
    errors, the exception itself for anything else."""
    if isinstance(exc, GatewayError):
        return fail(str(exc))
    if type(exc).__module__.startswith(("httpx", "httpcore")):
        # A timeout's message is empty: its name says what happened.
        return fail(f"cannot reach the gateway at {url}: {str(exc) or type(exc).__name__}")
    return exc


def build_bus(kafka: str | None, prefix: str | None) -> Bus:
    """The bus of a command, as ``Bus.from_env`` builds it, flags overriding the
    environment. A setting it cannot use ends the command (exit 2) with its name."""
    from a2a_bus.bus import Bus

    if kafka:  # named as the flag, not as the variable it becomes
        check_bootstrap(kafka, "--kafka")
    env = bus_environment(kafka, prefix)
    try:
        bus = Bus.from_env(env)  # refuses a bad value naming its variable
    except EnvError as exc:
        raise fail(str(exc), 2) from None
    except ValueError as exc:  # a flag's value, or a Kafka setting (named by the message)
        raise fail(str(exc), 2) from None
    return bus


def check_bootstrap(servers: str, name: str) -> None:
    """Bootstrap servers aiokafka can use, else one line naming where they came from
    (exit 2): aiokafka would fail with a bare ValueError deep in its start."""
    problem = bootstrap_problem(servers, name)
    if problem is not None:
        raise fail(problem, 2)


def kafka_bootstrap(bus: Bus) -> str | None:
    """The bootstrap servers of a bus on Kafka, None for another transport."""
    settings = getattr(bus.transport, "settings", None)
    servers = getattr(settings, "bootstrap_servers", None)
    return str(servers) if servers is not None else None


def kafka_failure(
    exc: BaseException,
    bootstrap: str | None,
    reason: str | None = None,
    protocol: str = "PLAINTEXT",
) -> BaseException:
    """What a command raises for ``exc`` on Kafka at ``bootstrap``: a clean exit when
    Kafka is out of reach or refuses (``reason``: what aiokafka logged meanwhile), the
    exception itself for anything else."""
    from aiokafka.errors import KafkaConnectionError, KafkaError

    if bootstrap is None or not isinstance(exc, KafkaError | OSError):
        return exc
    where = f"Kafka at {bootstrap}" + (f" ({protocol})" if protocol != "PLAINTEXT" else "")
    reason = (reason or "").strip().rstrip(":").strip()
    detail = f"{exc} ({reason})" if reason and reason not in str(exc) else str(exc)
    if isinstance(exc, KafkaConnectionError | OSError):
        return fail(f"cannot reach {where}: {detail}")
    return fail(f"{where}: {detail}")


def bus_failure(exc: BaseException, bus: Bus, reason: str | None = None) -> BaseException:
    """:func:`kafka_failure` for a command's bus (the exception itself off Kafka)."""
    settings = getattr(bus.transport, "settings", None)
    protocol = getattr(settings, "security_protocol", "PLAINTEXT")
    return kafka_failure(exc, kafka_bootstrap(bus), reason, protocol)


class _LastRecord(logging.Handler):
    """Keeps the last message logged (instead of printing it)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


@contextlib.contextmanager
def kafka_logs_held() -> Iterator[_LastRecord]:
    """aiokafka's log lines kept back (the last one becomes the reason of a failure)."""
    logger = logging.getLogger("aiokafka")
    handler = _LastRecord()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


@contextlib.asynccontextmanager
async def started(bus: Bus) -> AsyncIterator[Bus]:
    """``bus`` started, and stopped at the end; a Kafka it cannot reach ends the
    command with one line and exit 1."""
    with kafka_logs_held() as held:
        try:
            await bus.astart()
        except Exception as exc:
            raise bus_failure(exc, bus, held.last) from None
    try:
        yield bus
    finally:
        await bus.astop()


def run_on_kafka(kafka: str, prefix: str | None, action: Callable[[Bus], Awaitable[T]]) -> T:
    """Run ``action(bus)`` on a bus joined to Kafka (no agents hosted here)."""
    bus = build_bus(kafka, prefix)

    async def go() -> T:
        async with started(bus):
            return await action(bus)

    try:
        return run_async(go())
    except Exception as exc:
        raise bus_failure(exc, bus) from None
