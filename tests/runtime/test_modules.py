"""User code loaded by file path or module name: once per process, and every failure
one ``ModuleLoadError`` line (missing, a syntax error, a raise) instead of a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from a2a_bus.runtime.modules import ModuleLoadError, import_module, load_file


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def test_a_file_is_loaded_once_per_process(tmp_path: Path) -> None:
    path = write(tmp_path / "counter.py", "LOADS = []\nLOADS.append(1)\n")
    first = load_file(path)
    assert load_file(str(path)) is first
    assert load_file(tmp_path / "." / "counter.py") is first
    assert first.LOADS == [1]
    assert sys.modules[first.__name__] is first


def test_two_files_with_one_name_are_two_modules(tmp_path: Path) -> None:
    one = load_file(write(tmp_path / "a" / "tools.py", "WHERE = 'a'\n"))
    two = load_file(write(tmp_path / "b" / "tools.py", "WHERE = 'b'\n"))
    assert (one.WHERE, two.WHERE) == ("a", "b")


def test_a_dataclass_in_a_loaded_file_works(tmp_path: Path) -> None:
    # dataclasses look the module up in sys.modules while the file runs
    source = (
        "from __future__ import annotations\n"
        "from dataclasses import dataclass\n\n"
        "@dataclass\nclass Point:\n    x: int\n"
    )
    assert load_file(write(tmp_path / "points.py", source)).Point(3).x == 3


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.py"
    with pytest.raises(ModuleLoadError) as caught:
        load_file(missing)
    assert str(caught.value) == f"no such file: {missing}"
    assert caught.value.missing


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("x = \n", "SyntaxError: invalid syntax (line 1)"),
        ("\n\ndef f(:\n    pass\n", "(line 3)"),
        ("raise RuntimeError('no database')\n", "RuntimeError: no database"),
        ("import no_such_module_xyz\n", "ModuleNotFoundError: No module named 'no_such_module_"),
        ("raise SystemExit(3)\n", "SystemExit: 3"),
    ],
)
def test_a_file_that_fails_is_one_line_naming_the_error(
    tmp_path: Path, source: str, error: str
) -> None:
    path = write(tmp_path / "broken.py", source)
    with pytest.raises(ModuleLoadError) as caught:
        load_file(path)
    message = str(caught.value)
    assert message.startswith(f"cannot load {path}: ") and error in message, message
    assert "\n" not in message
    assert not caught.value.missing
    assert isinstance(caught.value, ImportError)


def test_a_failed_file_leaves_nothing_behind_and_loads_once_fixed(tmp_path: Path) -> None:
    path = write(tmp_path / "later.py", "raise RuntimeError('not yet')\n")
    with pytest.raises(ModuleLoadError):
        load_file(path)
    assert not [name for name in sys.modules if name.startswith("a2a_file_later_")]
    write(path, "READY = True\n")
    assert load_file(path).READY is True


def test_a_file_that_is_not_python_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "notes.txt", "hello\n")
    with pytest.raises(ModuleLoadError, match=r"cannot load .*notes\.txt: not a Python file"):
        load_file(path)


def test_import_module_by_name() -> None:
    assert import_module("a2a_bus.runtime.modules").load_file is load_file


@pytest.mark.parametrize("name", ["no_such_module_xyz", "no_such_module_xyz.sub", "json.nope"])
def test_a_module_that_does_not_exist_is_missing(name: str) -> None:
    with pytest.raises(ModuleLoadError) as caught:
        import_module(name)
    assert str(caught.value).startswith(f"cannot import {name!r}: ModuleNotFoundError: ")
    assert caught.value.missing


def test_a_module_whose_code_fails_is_not_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "needs_more.py", "import no_such_dependency_xyz\n")
    write(tmp_path / "raises_at_import.py", "raise ValueError('bad config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleLoadError) as caught:
        import_module("needs_more")
    assert "No module named 'no_such_dependency_xyz'" in str(caught.value)
    assert not caught.value.missing, "a dependency is missing, not the module"
    with pytest.raises(ModuleLoadError) as caught:
        import_module("raises_at_import")
    assert str(caught.value) == "cannot import 'raises_at_import': ValueError: bad config"
    assert not caught.value.missing
