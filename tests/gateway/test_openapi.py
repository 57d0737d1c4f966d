"""Hostile HTTP input: schemathesis drives a live gateway (``a2a-bus serve`` on
loopback) from its own ``GET /openapi.json``, with data that fits the document and
data that does not, on every endpoint. No response may be a 5xx, none may hang, and
every one must conform to the document (status, content type, headers, body schema).

The gateway has bearer tokens: the requests take turns with an unrestricted token,
one whose allow-lists refuse most things, and none, so the refusals (401, 403) are
checked as well as the answers. A live view (``GET /topics/{subject}/events``) never
ends by itself: its first bytes are read and the stream is closed, which is also how
"no hang" is judged there.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from a2a_bus.bus import Bus
from a2a_bus.gateway import create_app
from a2a_bus.gateway.openapi import path_template

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

#: Generated requests per operation and generation mode (fewer when the inputs are few).
EXAMPLES = 300
#: Processes generating requests (the machines running the suite have two cores).
WORKERS = 2
#: At least this many requests across every endpoint, or the run proves too little.
AT_LEAST = 5_000
#: Seconds a response may take: a guard against hangs, never a performance limit.
ANSWER_WITHIN = 30.0
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
LIVE_VIEW = "/topics/{subject}/events"
ROOT = Path(__file__).resolve().parents[2]
#: Tokens of the gateway under test: all allowed, little allowed (None: no token).
TOKENS = {
    "fuzz-admin": {"name": "admin"},
    "fuzz-shop": {
        "name": "shop",
        "agents": ["calc"],
        "methods": ["add", "subtract", "message/send", "SendMessage", "tasks/get", "GetTask"],
        "topics": ["orders.#"],
    },
}
TURNS: tuple[str | None, ...] = (*TOKENS, None)
AGENTS = ("a2a_bus.examples.calculator:Calculator", "a2a_bus.examples.echo:Echo")
SERVE = ("--http", "127.0.0.1:0", "--tokens")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``a2a-bus serve`` of the example agents in a process of its own (its own CPU
    too: generating requests keeps this one busy)."""
    folder = tmp_path_factory.mktemp("gateway")
    log, tokens = folder / "stderr.log", folder / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    env = {k: v for k, v in os.environ.items() if "KAFKA_" not in k and not k.startswith("A2A_")}
    env["A2A_GATEWAY_REQUEST_TIMEOUT"] = "5"
    with log.open("wb") as stderr:
        served = subprocess.Popen(
            [sys.executable, "-m", "a2a_bus", "serve", *AGENTS, *SERVE, str(tokens)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=ROOT,
        )
    try:
        assert served.stdout is not None
        for raw in served.stdout:
            line = raw.decode()
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].strip()
                break
        else:
            pytest.fail(f"the gateway did not start: {log.read_text()}")
        yield url
    finally:
        served.send_signal(signal.SIGTERM)
        try:
            served.wait(ANSWER_WITHIN)
        except subprocess.TimeoutExpired:
            served.kill()
            raise
    assert "Traceback" not in log.read_text(), log.read_text()


def call_live_view(
    case: Case, url: str, session: requests.Session, headers: dict[str, str]
) -> requests.Response | None:
    """Open a live view and read its first bytes (None: it opened as it should); an
    answer that is no stream is read whole and returned for the checks."""
    kwargs = case.as_transport_kwargs(base_url=url, headers=headers)
    with session.request(**kwargs, stream=True, timeout=ANSWER_WITHIN) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            first = next(response.iter_content(chunk_size=None))
            assert response.status_code == 200, response.status_code
            assert first.startswith(b": tailing "), first
            return None
        response.content  # noqa: B018 - read it all before the stream closes
        return response


def exercise(case: Case, url: str, session: requests.Session, token: str | None) -> None:
    """One generated request (with ``token``) and the checks of its response."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    if case.operation.path == LIVE_VIEW:
        response = call_live_view(case, url, session, headers)
        if response is not None:
            case.validate_response(response, checks=CHECKS, headers=headers)
        return
    case.call_and_validate(
        base_url=url, session=session, headers=headers, checks=CHECKS, timeout=ANSWER_WITHIN
    )


class Run(NamedTuple):
    """What fuzzing one operation in one generation mode came to."""

    label: str
    mode: str
    sent: int
    seconds: float
    #: The first failure, as schemathesis reports it (with a curl command), or None.
    failure: str | None


@functools.cache
def _operations(url: str) -> dict[str, APIOperation]:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    return {op.label: op for op in (result.ok() for result in schema.get_all_operations())}


def fuzz(url: str, label: str, mode: str) -> Run:
    """Up to ``EXAMPLES`` requests to the operation ``label``, in a worker process."""
    operation = _operations(url)[label]
    session = requests.Session()
    sent = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same requests every run: a failure reproduces
        phases=[Phase.explicit, Phase.generate],  # no shrinking: report it as found
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=GenerationMode(mode)))
    def run(case: Case) -> None:
        nonlocal sent
        exercise(case, url, session, TURNS[sent % len(TURNS)])
        sent += 1

    began = time.perf_counter()
    failure = None
    try:
        run()
    except Unsatisfiable:  # nothing to get wrong: no parameters, no body
        assert mode == GenerationMode.NEGATIVE.value, label
    except (Exception, FailureGroup) as exc:
        failure = str(exc)
    return Run(label, mode, sent, time.perf_counter() - began, failure)


def test_every_endpoint_answers_hostile_requests_as_its_document_says(gateway: str) -> None:
    operations = _operations(gateway)
    paths = requests.get(f"{gateway}/openapi.json", timeout=ANSWER_WITHIN).json()["paths"]
    # schemathesis leaves out the document's own path: it is read here.
    assert {op.path for op in operations.values()} == set(paths) - {"/openapi.json"}
    jobs = [(label, mode.value) for label in operations for mode in GenerationMode]
    # Two workers: generating requests costs far more CPU than answering them.
    with ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = list(pool.map(fuzz, [gateway] * len(jobs), *zip(*jobs, strict=True)))
    for run in runs:
        print(f"{run.label} {run.mode}: {run.sent} requests in {run.seconds:.1f} s")
    failures = [f"{run.label} ({run.mode}): {run.failure}" for run in runs if run.failure]
    assert not failures, "\n\n".join(failures)
    sent = {label: sum(r.sent for r in runs if r.label == label) for label in operations}
    assert all(sent.values()), sent  # every endpoint was called
    assert sum(sent.values()) >= AT_LEAST, sent


def test_the_document_is_served_and_names_every_route(gateway: str) -> None:
    """Every route of the app is in the document (a new endpoint must be described)."""
    doc: dict[str, Any] = requests.get(f"{gateway}/openapi.json", timeout=ANSWER_WITHIN).json()
    assert doc["openapi"] == "3.1.0"
    app = create_app(Bus.memory())
    routes = {path_template(route.path) for route in app.routes}  # type: ignore[attr-defined]
    assert routes == set(doc["paths"])
