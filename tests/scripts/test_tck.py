"""``scripts/tck.sh`` with a stand-in for the conformance kit (the kit itself is
another project's, run by hand): the script serves the agent at the root, hands the
kit a localhost URL per category, prints each summary and the failing tests, exits 1
when a category fails, and stops the gateway."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SCRIPTS

pytestmark = pytest.mark.timeout(180)

#: The stand-in: reads the root card, sends the category's name to the URL it names
#: and passes when the echo agent answers it; the category "failing" fails.
STAND_IN = """
import argparse, json, sys, urllib.request

parser = argparse.ArgumentParser()
for option in ("--sut-url", "--category", "--transports"):
    parser.add_argument(option)
args = parser.parse_args()
card = json.load(urllib.request.urlopen(args.sut_url + "/.well-known/agent-card.json"))
message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": args.category}]}
body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
request = urllib.request.Request(card["url"], json.dumps(body).encode(), method="POST")
task = json.load(urllib.request.urlopen(request))["result"]["task"]
answered = task["artifacts"][0]["parts"][0]["text"] == args.category
print(f"{card['name']} at {card['url']} over {args.transports}")
if args.category == "failing" or not answered:
    print("FAILED tests/test_stand_in.py::test_it - as asked")
    print("==== 1 failed, 1 passed in 0.01s ====")
    sys.exit(1)
print("==== 2 passed in 0.01s ====")
"""


def test_the_kit_runs_per_category_against_the_root_agent(tmp_path: Path) -> None:
    kit, venv, logs = tmp_path / "kit", tmp_path / "venv", tmp_path / "logs"
    kit.mkdir()
    (kit / "pyproject.toml").write_text("[project]\nname = 'stand-in'\n")
    (kit / "run_tck.py").write_text(STAND_IN)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / ".a2a-tck-installed").touch()  # newer than the pyproject: nothing to install
    env = {
        **os.environ,
        "A2A_TCK_DIR": str(kit),
        "A2A_TCK_VENV": str(venv),
        "A2A_TCK_LOGS": str(logs),
        "A2A_PYTHON": sys.executable,
        "A2A_TCK_TARGETS": "a2a_bus.examples.echo:Echo",  # answers at once
        "A2A_TCK_ROOT": "echo",
    }
    done = subprocess.run(
        [str(SCRIPTS / "tck.sh"), "mandatory", "failing"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert "mandatory: 2 passed in 0.01s [ok]" in lines, done.stdout
    assert "failing: 1 failed, 1 passed in 0.01s [failures]" in lines, done.stdout
    assert "  FAILED tests/test_stand_in.py::test_it - as asked" in lines, done.stdout
    kit_said = (logs / "mandatory.log").read_text()
    assert kit_said.startswith("echo at http://localhost:") and "over jsonrpc" in kit_said
    assert "a2a-bus: stopped" in (logs / "gateway.log").read_text()  # stopped cleanly
