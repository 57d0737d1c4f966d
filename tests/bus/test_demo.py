"""The scripted demo runs every step on the in-memory transport and exits 0."""

from __future__ import annotations

import io

from rich.console import Console
from typer.testing import CliRunner

from a2a_bus.cli import _register, app
from a2a_bus.demo import run


def test_demo_session_passes_every_step() -> None:
    buffer = io.StringIO()
    assert run(console=Console(file=buffer, width=120)) == 0
    text = buffer.getvalue()
    assert "all steps ok" in text
    assert "calc.count(to=10) chunks" in text


def test_demo_command_is_registered() -> None:
    _register()
    result = CliRunner().invoke(app, ["demo", "--help"])
    assert result.exit_code == 0
    assert "--kafka" in result.output
