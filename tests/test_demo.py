"""The scripted demo runs every step, the LLM agent's included, and exits 0; a wrong
answer fails it. Runs on the in-memory transport, once on Kafka, and once from a copy
of the package alone (its agents ship inside it, not in the checkout's agents/)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

import a2a_bus
from a2a_bus import method
from a2a_bus.cli.console import app
from a2a_bus.demo import run
from a2a_bus.examples.calculator import Calculator
from a2a_bus.llm import ScriptedClient

PACKAGE = Path(a2a_bus.__file__).parent
WAIT = 120.0  # seconds; a guard against hangs, never a performance limit

# The checks of the step "LLM agent on the bus", by label.
LLM_CHECKS = [
    "concierge tool call",
    "concierge.chat('what is 42 - 23?')",
    "chat/stream chunk types",
    "chat/stream tokens joined",
    "chat/stream done content",
    "trigger news.tech: answer",
    "trigger conversation",
]


# The checks of the step "MCP tool and a schedule", by label.
ALMANAC_CHECKS = [
    "almanac MCP tool call",
    "almanac.chat('how many mi is 42 km?')",
    "schedule almanac-clock woke the almanac",
    "its check-in",
]


def run_demo(kafka: str | None = None, **swaps: Any) -> tuple[int, str]:
    buffer = io.StringIO()
    code = run(kafka, console=Console(file=buffer, width=200), **swaps)
    return code, buffer.getvalue()


def llm_step(text: str) -> list[str]:
    """The lines the LLM step printed."""
    assert "LLM agent on the bus" in text
    step = text.split("LLM agent on the bus", 1)[1].split("\nCounters", 1)[0]
    return step.splitlines()[1:]


def check_line(lines: list[str], label: str) -> str:
    [line] = [line for line in lines if line.strip().startswith(f"{label} -> ")]
    return line


def assert_llm_step_ok(text: str) -> None:
    lines = llm_step(text)
    for label in LLM_CHECKS:
        assert check_line(lines, label).endswith("  ok"), label
    assert check_line(lines, "concierge tool call").endswith(
        "['call_agent: calc.subtract[42, 23] -> 19']  ok"
    )
    assert check_line(lines, "trigger news.tech: answer").endswith(
        "'Tech in brief: Quantum chip ships'  ok"
    )
    chunks = [line.strip() for line in lines if line.startswith("    ")]
    assert chunks[:2] == ["tool_start call_agent", "tool_end call_agent success=True"]
    assert chunks[-1] == "done '6 * 7 = 42' turns_used=2"
    assert {chunk.split(" ")[0] for chunk in chunks[2:-1]} == {"token"}


def assert_almanac_step_ok(text: str) -> None:
    assert "MCP tool and a schedule" in text
    step = text.split("MCP tool and a schedule", 1)[1].split("\nCounters", 1)[0]
    lines = step.splitlines()[1:]
    for label in ALMANAC_CHECKS:
        assert check_line(lines, label).endswith("  ok"), label
    assert "['units__convert_length']" in check_line(lines, "almanac MCP tool call")
    assert "'42 km = 26.098 mi'" in check_line(lines, "almanac.chat('how many mi is 42 km?')")


def test_demo_session_passes_every_step() -> None:
    code, text = run_demo()
    assert code == 0
    assert "all steps ok" in text
    assert "calc.count(to=10) chunks" in text
    assert_llm_step_ok(text)
    assert_almanac_step_ok(text)


class AddingCalculator(Calculator):
    """A calculator that adds when asked to subtract."""

    agent_id = "calc"

    @method
    def subtract(self, minuend: float, subtrahend: float) -> float:
        """minuend + subtrahend (wrong on purpose)"""
        return minuend + subtrahend


def test_a_wrong_llm_answer_fails_the_demo() -> None:
    # A model that answers without asking the calculator.
    wrong = ScriptedClient(lambda messages, tools: "42 - 23 = 20", record=False)

    code, text = run_demo(model=wrong)

    assert code == 1
    lines = llm_step(text)
    for label in LLM_CHECKS[:-1]:  # the trigger's answer is still in its own conversation
        assert "expected" in check_line(lines, label), label
    assert check_line(lines, "concierge tool call").startswith("  concierge tool call -> []")
    assert "failed:" in text and "all steps ok" not in text


def test_the_concierge_answers_with_what_the_calculator_returned() -> None:
    # The concierge passes on whatever the calculator it called answered.
    code, text = run_demo(calculator=AddingCalculator)

    assert code == 1
    lines = llm_step(text)
    assert "'call_agent: calc.subtract[42, 23] -> 65'" in check_line(lines, "concierge tool call")
    assert "-> '42 - 23 = 65'  expected '42 - 23 = 19'" in check_line(
        lines, "concierge.chat('what is 42 - 23?')"
    )


def test_the_demo_runs_from_the_package_alone(tmp_path: Path) -> None:
    # As from an installed wheel: only the package, run from a directory that is not
    # the checkout, so the repository's agents/ folder cannot be reached.
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "a2a_bus", ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = (
        "import a2a_bus, a2a_bus.demo, a2a_bus.examples.calculator as calc\n"
        "print('package:', a2a_bus.__file__)\n"
        "print('calculator:', calc.__file__)\n"
        "raise SystemExit(a2a_bus.demo.main([]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("A2A_", "KAFKA_", "OPENAI_"))}
    env["PYTHONPATH"] = str(site)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"package: {site / 'a2a_bus' / '__init__.py'}" in done.stdout
    assert f"calculator: {site / 'a2a_bus' / 'examples' / 'calculator.py'}" in done.stdout
    assert "all steps ok" in done.stdout


@pytest.mark.kafka
def test_demo_on_kafka_passes_every_step(kafka_bootstrap: str) -> None:
    code, text = run_demo(kafka_bootstrap)
    assert code == 0, text
    assert f"a2a-bus demo on Kafka at {kafka_bootstrap}" in text
    assert_llm_step_ok(text)
    assert_almanac_step_ok(text)


def test_demo_command_is_registered() -> None:
    result = CliRunner().invoke(app, ["demo", "--help"])
    assert result.exit_code == 0
    assert "--kafka" in result.output
