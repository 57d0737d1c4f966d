"""``serve`` targets: agent files' errors read ``file:line: key: problem`` once, every
accepted suffix is named in the help, a ``.py`` file runs once however many of its
classes are served, and a target that cannot load is one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer

from a2a_bus.cli.targets import AGENT_FILE_SUFFIXES, load_target, load_targets

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


AGENTS_SOURCE = """
from a2a_bus import Agent, method

STARTS = []
STARTS.append(1)


class One(Agent):
    @method
    def ping(self) -> str:
        return "one"


class Two(Agent):
    @method
    def ping(self) -> str:
        return "two"
"""


def test_two_targets_of_one_file_share_its_module(tmp_path: Path) -> None:
    path = tmp_path / "pair.py"
    path.write_text(AGENTS_SOURCE)
    one, two = load_targets([f"{path}:One", f"{path}:Two"])
    assert (one.agent_id, two.agent_id) == ("one", "two")
    module = sys.modules[one.__module__]
    assert two.__module__ == one.__module__
    assert module.STARTS == [1], "the file ran once"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("{tmp}/nowhere.py:X", "no such file: {tmp}/nowhere.py"),
        ("{tmp}/broken.py:X", "cannot load {tmp}/broken.py: SyntaxError: invalid syntax (line 1)"),
        ("no_such_module_xyz:X", "cannot import 'no_such_module_xyz': ModuleNotFoundError: "),
    ],
)
def test_a_target_that_cannot_load_is_one_line(tmp_path: Path, target: str, message: str) -> None:
    (tmp_path / "broken.py").write_text("x = \n")
    with pytest.raises(typer.BadParameter) as caught:
        load_target(target.format(tmp=tmp_path))
    assert caught.value.message.startswith(message.format(tmp=tmp_path)), caught.value.message
