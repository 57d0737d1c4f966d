"""The scripted demo runs every step, the LLM agent's included, and exits 0; a wrong
answer fails it. Runs on the in-memory transport, and once on Kafka."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from a2a_bus import demo
from a2a_bus.cli import app
from a2a_bus.demo import run

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


def run_demo(kafka: str | None = None) -> tuple[int, str]:
    buffer = io.StringIO()
    code = run(kafka, console=Console(file=buffer, width=200))
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


def test_demo_session_passes_every_step() -> None:
    code, text = run_demo()
    assert code == 0
    assert "all steps ok" in text
    assert "calc.count(to=10) chunks" in text
    assert_llm_step_ok(text)


def agents_copy(folder: Path, **edits: tuple[str, str]) -> Path:
    """The example agents copied to ``folder``, with ``name=(old, new)`` replacements."""
    for name in ("calculator", "echo", "news", "concierge"):
        source = (demo.AGENTS_DIR / f"{name}.py").read_text()
        if name in edits:
            old, new = edits[name]
            assert old in source
            source = source.replace(old, new)
        (folder / f"{name}.py").write_text(source)
    return folder


def test_a_wrong_llm_answer_fails_the_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A model that answers without asking the calculator.
    wrong = ("ScriptedClient(respond,", "ScriptedClient(lambda messages, tools: '42 - 23 = 20',")
    monkeypatch.setattr(demo, "AGENTS_DIR", agents_copy(tmp_path, concierge=wrong))

    code, text = run_demo()

    assert code == 1
    lines = llm_step(text)
    for label in LLM_CHECKS[:-1]:  # the trigger's answer is still in its own conversation
        assert "expected" in check_line(lines, label), label
    assert check_line(lines, "concierge tool call").startswith("  concierge tool call -> []")
    assert "failed:" in text and "all steps ok" not in text


def test_the_concierge_answers_with_what_the_calculator_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A calculator that adds when asked to subtract: the concierge passes its answer on.
    broken = ("return minuend - subtrahend", "return minuend + subtrahend")
    monkeypatch.setattr(demo, "AGENTS_DIR", agents_copy(tmp_path, calculator=broken))

    code, text = run_demo()

    assert code == 1
    lines = llm_step(text)
    assert "'call_agent: calc.subtract[42, 23] -> 65'" in check_line(lines, "concierge tool call")
    assert "-> '42 - 23 = 65'  expected '42 - 23 = 19'" in check_line(
        lines, "concierge.chat('what is 42 - 23?')"
    )


@pytest.mark.kafka
def test_demo_on_kafka_passes_every_step(kafka_bootstrap: str) -> None:
    code, text = run_demo(kafka_bootstrap)
    assert code == 0, text
    assert f"a2a-bus demo on Kafka at {kafka_bootstrap}" in text
    assert_llm_step_ok(text)


def test_demo_command_is_registered() -> None:
    result = CliRunner().invoke(app, ["demo", "--help"])
    assert result.exit_code == 0
    assert "--kafka" in result.output
