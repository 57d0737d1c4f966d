"""User code as Python modules: a file by its path, or a module by its name.

``a2a-bus serve path/to/agents.py:Class`` and the ``callable:`` of an agent file
load code this way. Either way a failure is one :class:`ModuleLoadError` with a
one-line message: the file is missing, or the module's own code failed (a syntax
error, an exception it raised), named with the error and never a traceback.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType


class ModuleLoadError(ImportError):
    """A Python file or module that cannot be loaded; the message is one line."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        #: True when the file, or the named module itself, does not exist (as opposed
        #: to existing and failing to import).
        self.missing = missing


def load_file(path: str | os.PathLike[str]) -> ModuleType:
    """The module of the Python file at ``path``, executed once per process: a second
    load of the same file is the same module (its classes and state are shared)."""
    shown = os.fspath(path)
    resolved = Path(path).resolve()
    if not resolved.is_file():
        raise ModuleLoadError(f"no such file: {shown}", missing=True)
    # Named after the file's place, so two files with one name stay two modules.
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    name = f"a2a_file_{resolved.stem}_{digest}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise ModuleLoadError(f"cannot load {shown}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import does: dataclasses and pickling look it up.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise ModuleLoadError(f"cannot load {shown}: {_describe(exc)}") from None
    return module


def import_module(name: str) -> ModuleType:
    """``importlib.import_module(name)``, failing with a :class:`ModuleLoadError`."""
    try:
        return importlib.import_module(name)
    except (Exception, SystemExit) as exc:
        # Missing itself or one of its packages, not a module its code imports.
        absent = exc.name if isinstance(exc, ModuleNotFoundError) else None
        missing = absent is not None and (name == absent or name.startswith(f"{absent}."))
        message = f"cannot import {name!r}: {_describe(exc)}"
        raise ModuleLoadError(message, missing=missing) from None


def _describe(exc: BaseException) -> str:
    """An error in one line: its type and message (a syntax error with its line)."""
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {exc.msg} (line {exc.lineno})"
    return f"{type(exc).__name__}: {exc}"
