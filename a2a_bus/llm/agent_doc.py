"""Reading agent files: YAML or TOML text into data, with the line of every key,
so that every problem is reported as ``file:line: key: problem``."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from a2a_bus.llm.errors import AgentConfigError, AgentFileError

Path_ = tuple[str, ...]

#: The deepest nesting of an agent file, and the most values it may hold once its
#: aliases are expanded: beyond them a file is refused, not left to crash or hang
#: whatever reads it (a YAML alias bomb expands a few lines into billions of values).
MAX_DEPTH = 64
MAX_VALUES = 100_000


class Document:
    """Parsed data plus the line of every key, for error messages."""

    def __init__(self, file: str, data: Any, lines: dict[Path_, int]) -> None:
        self.file = file
        self.data = data
        self.lines = lines

    def error(self, path: Path_, problem: str) -> AgentFileError:
        line = None
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                break
        return AgentFileError(self.file, line, ".".join(path), problem)


# -- reading ---------------------------------------------------------------


def read_text(path: Path) -> str:
    """A file's UTF-8 text; ``AgentConfigError`` saying why it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentConfigError(f"cannot read the file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        where = f"byte {exc.object[exc.start]:#x} at {exc.start}"
        raise AgentConfigError(f"cannot read the file: not UTF-8 text ({where})") from None


class _KeysAsWritten(yaml.SafeLoader):
    """Mapping keys as the file spells them: ``on:`` and ``1:`` are the names "on" and "1"
    (YAML 1.1 would make them true and 1), as the key lines are recorded."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise yaml.constructor.ConstructorError(
                    None, None, "a key must be a name, not a list or mapping", key_node.start_mark
                )
            if key_node.tag != "tag:yaml.org,2002:merge":  # keep << merges working
                key_node.tag = "tag:yaml.org,2002:str"
        return super().construct_mapping(node, deep)


def read_yaml(file: str, text: str) -> Document:
    loader = _KeysAsWritten(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise AgentFileError(file, 1, "", "the file is empty")
        lines: dict[Path_, int] = {(): node.start_mark.line + 1}
        _mark_lines(file, node, (), lines, set())
        data = loader.construct_document(node)
    except RecursionError:  # the parser's own limit, before MAX_DEPTH is checked
        raise AgentFileError(file, None, "", "invalid YAML: nested too deeply") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise AgentFileError(file, line, "", f"invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise AgentFileError(file, None, "", f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return Document(file, data, lines)


def _mark_lines(
    file: str, node: yaml.Node, path: Path_, lines: dict[Path_, int], open_nodes: set[int]
) -> None:
    """Record the line of every key and item, aliases expanded (``open_nodes``: the
    mappings and lists being walked, which an alias inside them must not name)."""
    if len(lines) > MAX_VALUES:
        top = path[:1]  # the keyword whose value grew past the bound
        problem = f"more than {MAX_VALUES} values once its aliases are expanded"
        raise AgentFileError(file, lines.get(top), ".".join(top), problem)
    where = lines.get(path, node.start_mark.line + 1)  # an alias: its own line
    if len(path) > MAX_DEPTH:
        raise AgentFileError(file, where, "", f"nested more than {MAX_DEPTH} levels deep")
    if id(node) in open_nodes:
        problem = "an alias inside the value it names (it would contain itself)"
        raise AgentFileError(file, where, ".".join(path), problem)
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        open_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                raise AgentFileError(
                    file, key_node.start_mark.line + 1, ".".join((*path, key)), "duplicate key"
                )
            seen.add(key)
            lines[(*path, key)] = key_node.start_mark.line + 1
            _mark_lines(file, value_node, (*path, key), lines, open_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, str(index))] = item.start_mark.line + 1
            _mark_lines(file, item, (*path, str(index)), lines, open_nodes)
    open_nodes.discard(id(node))


_TOML_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"^\s*([A-Za-z0-9_.\"' -]+?)\s*=")


def _toml_parts(text: str) -> Path_:
    return tuple(part.strip().strip("\"'") for part in text.split("."))


def read_toml(file: str, text: str) -> Document:
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise AgentFileError(file, None, "", "invalid TOML: nested too deeply") from None
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise AgentFileError(
            file, int(match.group(1)) if match else None, "", f"invalid TOML: {exc}"
        ) from None
    # tomllib keeps no positions: find the lines of tables and keys by scanning.
    lines: dict[Path_, int] = {(): 1}
    table: Path_ = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TOML_TABLE.match(line)
        if header:
            table = _toml_parts(header.group(1))
            lines.setdefault(table, number)
            continue
        key = _TOML_KEY.match(line)
        if key:
            lines.setdefault((*table, *_toml_parts(key.group(1))), number)
    return Document(file, data, lines)


def expect(doc: Document, path: Path_, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise doc.error(path, f"expected {what}, got a boolean")
    if not isinstance(value, kind):
        raise doc.error(path, f"expected {what}, got {type(value).__name__}")
    return value
