"""``serve`` targets that are agent files: their errors read ``file:line: key: problem``
once, and every accepted suffix is named in the help."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from a2a_bus.cli.targets import AGENT_FILE_SUFFIXES, load_target

from .test_serve_call import run

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_an_agent_file_error_names_its_file_once(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"helper.agent{suffix}"
    path.write_text("name: helper\nmax_turns: 0\n")
    with pytest.raises(typer.BadParameter) as caught:
        load_target(str(path))
    assert caught.value.message == f"{path}:2: max_turns: must be >= 1"


def test_a_valid_yml_file_is_an_agent(tmp_path: Path) -> None:
    path = tmp_path / "helper.agent.yml"
    path.write_text("name: helper\n")
    assert load_target(str(path)).agent_id == "helper"


def test_serve_help_names_every_agent_file_suffix() -> None:
    done = run("serve", "--help")
    assert done.returncode == 0
    help_text = " ".join(done.stdout.split())  # rich wraps lines
    assert f"({'/'.join(AGENT_FILE_SUFFIXES)})" in help_text
    assert ".yml" in help_text
