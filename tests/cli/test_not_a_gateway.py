"""A ``--url`` that is some other web server (a typo'd port, a proxy's login page)
is one ``error:`` line, exit 1, whatever it answers: never a traceback, never its
whole HTML page on stderr."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
import typer

from a2a_bus.cli.common import gateway_failure

from .test_failures import one_error_line
from .test_serve_call import run

pytestmark = pytest.mark.timeout(180)

PAGE = b"<html>\n  <body>\n    <h1>Welcome</h1>\n  </body>\n</html>\n"
VIEW = b": tailing orders.eu\n\n"


#: Under /odd, what each route answers: JSON, but not what a gateway answers there.
ODD = {
    "/odd/rpc": ("application/json", b"{}"),
    "/odd/agents": ("application/json", b'{"agents": [1, "calc"]}'),
    "/odd/topics/orders.eu/history": (
        "application/json",
        b'{"events": [7], "cursor": null, "undecodable": 0}',
    ),
    "/odd/topics/orders.eu/events": ("text/event-stream", b"data: <p>an event</p>\n\n"),
}


class _Page(BaseHTTPRequestHandler):
    """Answers every GET and POST with an HTML page: 200, or 404 under /missing;
    under /ends, the start of a live view that then ends (as a proxy may end it);
    under /odd, JSON of another shape (see ODD)."""

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        ends = self.path.startswith("/ends")
        kind, body = ODD.get(self.path.split("?")[0], ("text/html", VIEW if ends else PAGE))
        self.send_response(404 if self.path.startswith("/missing") else 200)
        self.send_header("content-type", "text/event-stream" if ends else kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


COMMANDS = [
    ["call", "add", "[1, 2]"],
    ["agents"],
    ["read", "orders.eu"],
    ["publish", "orders.eu", "{}"],
    ["tail", "orders.eu"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_a_page_that_is_no_gateway_answer_is_one_line(web: str, command: list[str]) -> None:
    done = run(*command, "--url", web)
    line = one_error_line(done, 1)
    assert line.startswith(f"error: {web} is not an a2a-bus gateway: "), line
    assert "text/html" in line, line


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_an_error_page_is_one_line(web: str, command: list[str]) -> None:
    done = run(*command, "--url", f"{web}/missing")
    line = one_error_line(done, 1)
    assert line == "error: HTTP 404: <html> <body> <h1>Welcome</h1> </body> </html>", line
    assert done.stderr.count("\n") == 1, done.stderr


def test_tail_ends_when_the_live_view_ends(web: str) -> None:
    done = run("tail", "orders.eu", "--url", f"{web}/ends")
    line = one_error_line(done, 1)
    assert line == "error: the gateway ended the live view of 'orders.eu'", line


@pytest.mark.parametrize("command", [c for c in COMMANDS if c[0] != "publish"], ids=lambda c: c[0])
def test_json_that_is_no_gateway_answer_is_one_line(web: str, command: list[str]) -> None:
    # A JSON-RPC response with neither result nor error, cards or events that are not
    # objects: a stranger's answer, not a traceback (nor `{}` printed as a result).
    done = run(*command, "--url", f"{web}/odd")
    line = one_error_line(done, 1)
    assert line.startswith(f"error: {web}/odd is not an a2a-bus gateway: "), line


def test_a_gateway_that_does_not_answer_in_time_is_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # httpx's timeouts carry no message: the line would end with "...:8080: ".
    url = "http://127.0.0.1:8080"
    failure = gateway_failure(httpx.ReadTimeout(""), url)
    assert isinstance(failure, typer.Exit) and failure.exit_code == 1
    assert capsys.readouterr().err == f"error: cannot reach the gateway at {url}: ReadTimeout\n"
