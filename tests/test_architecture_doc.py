"""docs/architecture.md and the README's layout name only what the code has.

Every module path, ``module.py: name`` and ``Class.member`` the architecture page
quotes, and every path of the README's layout, is looked up in the source (read
with :mod:`ast`, nothing imported), so a rename that forgets the docs fails here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "a2a_bus"
ARCHITECTURE = REPO / "docs" / "architecture.md"
README = REPO / "README.md"

#: ``module.py`` or ``dir/module.py``, optionally followed by ``: name`` or ``: Class.member``.
_MODULE_SPAN = re.compile(r"(?P<path>[\w/]+\.py)(?::\s*(?P<name>[A-Za-z_][\w.]*))?")
#: ``Class.member``, optionally called: ``Transport.inboxes()``, ``Transport.dead_letter(X)``.
_MEMBER_SPAN = re.compile(r"(?P<cls>[A-Z]\w*)\.(?P<member>[a-z_]\w*)(?:\(.*\))?")
#: A package folder: ``gateway/``.
_PACKAGE_SPAN = re.compile(r"(?P<path>[a-z_]\w*(?:/[a-z_]\w*)*)/")


def _names(tree: ast.Module) -> dict[str, set[str]]:
    """Top-level names of a module, each with its members when it is a class."""
    found: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members: set[str] = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    members.add(item.name)
                    members.update(_self_attributes(item))
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    members.update(t.id for t in item.targets if isinstance(t, ast.Name))
            found[node.name] = members
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = set()
        elif isinstance(node, ast.Assign):
            found.update((t.id, set()) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = set()
    return found


def _self_attributes(method: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The attributes ``method`` sets on ``self`` (``self.answer_local = ...``)."""
    targets: list[ast.expr] = []
    for node in ast.walk(method):
        if isinstance(node, ast.Assign):
            targets += node.targets
        elif isinstance(node, ast.AnnAssign):
            targets.append(node.target)
    return {
        target.attr
        for target in targets
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }


def _modules() -> dict[Path, dict[str, set[str]]]:
    return {path: _names(ast.parse(path.read_text(), str(path))) for path in PACKAGE.rglob("*.py")}


MODULES = _modules()


def _spans(text: str) -> Iterator[str]:
    yield from re.findall(r"`([^`\n]+)`", text)


def _files(path: str) -> list[Path]:
    """The modules ``path`` may mean: from the repository, from the package, or a
    shorter path the text's context completes (``answering.py`` in the hosting row)."""
    for base in (REPO, PACKAGE):
        if (base / path).is_file():
            return [base / path]
    return [module for module in MODULES if module.as_posix().endswith(f"/{path}")]


def _has(names: dict[str, set[str]], dotted: str) -> bool:
    """``names`` (of one module) has ``dotted``: a top-level name, ``Class.member``,
    or a bare member of one of its classes (``dispatch.py: send``)."""
    top, _, member = dotted.partition(".")
    if member:
        return member in names.get(top, ())
    return top in names or any(top in members for members in names.values())


def _problems(span: str) -> list[str]:
    """What ``span`` names that the source lacks (empty: all found, or no code name)."""
    if match := _MODULE_SPAN.fullmatch(span):
        files = _files(match["path"])
        if not files:
            return [f"{span}: no module {match['path']}"]
        name = match["name"]
        if name and not any(_has(MODULES.get(file, {}), name) for file in files):
            return [f"{span}: {match['path']} has no {name}"]
        return []
    if match := _MEMBER_SPAN.fullmatch(span):
        dotted = f"{match['cls']}.{match['member']}"
        if not any(_has(names, dotted) for names in MODULES.values()):
            return [f"{span}: no class {match['cls']} with {match['member']}"]
        return []
    if (match := _PACKAGE_SPAN.fullmatch(span)) and not (PACKAGE / match["path"]).is_dir():
        return [f"{span}: no package a2a_bus/{match['path']}"]
    return []


def test_the_architecture_page_names_only_modules_and_members_the_code_has() -> None:
    spans = list(_spans(ARCHITECTURE.read_text()))
    checked = [span for span in spans if _MODULE_SPAN.fullmatch(span)]
    assert len(checked) > 20  # the page still quotes modules: the check reads them
    problems = [problem for span in spans for problem in _problems(span)]
    assert problems == []


def _layout_paths() -> list[str]:
    """The paths at the start of the README layout's lines, and the ``x.py:`` notes."""
    text = README.read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    paths = []
    for line in block.splitlines():
        words = line.split()
        first = words[0].rstrip(":") if words else ""
        if "/" in first or first.endswith(".py"):
            paths.append(first)
        paths += re.findall(r"\b([a-z_]+\.py):", line)
    return list(dict.fromkeys(paths))


def test_every_path_of_the_readme_layout_exists() -> None:
    paths = _layout_paths()
    assert "a2a_bus/core/" in paths and "settings.py" in paths
    missing = [
        path for path in paths if not (REPO / path).exists() and not (PACKAGE / path).exists()
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("span", "found"),
    [
        ("core/dispatch.py", True),
        ("core/dispatch.py: Dispatcher.send", True),
        ("core/dispatch.py: send", True),  # a member of a class of the module
        ("Dispatcher.answer_local", True),  # set on self in __init__
        ("answering.py", True),  # short: completed from the package
        ("core/dispatch.py: Dispatcher.sent", False),
        ("core/dispatched.py", False),
        ("Correlator.on_reply", True),
        ("Transport.inboxes()", True),
        ("Correlator.on_replies", False),
        ("hosting/", True),
        ("hostings/", False),
        ("a2a.agent.calc", True),  # a topic: no code name to look up
    ],
)
def test_the_lookup_finds_what_exists_and_only_that(span: str, found: bool) -> None:
    assert (_problems(span) == []) is found
