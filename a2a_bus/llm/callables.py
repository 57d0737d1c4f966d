"""Callables named in agent files: ``module:function`` or ``path.py:function``."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from a2a_bus.llm.tools import FunctionTool


def callable_label(reference: str) -> str:
    """How messages name a callable: ``support_tools:search`` and ``./support_tools.py:search``
    are both ``support_tools.search`` (not the internal name a loaded file gets)."""
    target, _, attribute = reference.rpartition(":")
    if target.endswith(".py") or "/" in target or os.sep in target:
        target = Path(target).stem
    return f"{target}.{attribute}"


def resolve_callable(reference: str, base: Path) -> Callable[..., Any]:
    """``module:function`` or ``path.py:function`` (relative to ``base``)."""
    target, sep, attribute = reference.rpartition(":")
    if not sep or not target or not attribute:
        raise ValueError(f"expected module:function or path.py:function, got {reference!r}")
    try:
        module = _module(target, base)
    except ImportError:
        raise
    except Exception as exc:  # the module's own code failed: a syntax error, a raise
        raise ImportError(f"cannot import module {target!r}: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AttributeError(f"{target!r} has no attribute {attribute!r}") from None
    if isinstance(obj, FunctionTool):
        return obj.func
    if not callable(obj):
        raise ValueError(f"{reference!r} is not callable")
    return obj


def _module(target: str, base: Path) -> ModuleType:
    """The module a callable reference names: a path, an importable module or a local .py."""
    if target.endswith(".py") or "/" in target or os.sep in target:
        return _load_path(base / target)
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        local = base / (target.replace(".", "/") + ".py")
        missing_itself = exc.name in (target, target.split(".")[0])
        if not missing_itself or not local.is_file():
            raise ImportError(f"cannot import module {target!r}: {exc}") from None
        return _load_path(local)


def _load_path(path: Path) -> ModuleType:
    path = path.resolve()
    if not path.is_file():
        raise ImportError(f"no such file {path}")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    module_name = f"a2a_agent_tools_{path.stem}_{digest}"
    module = sys.modules.get(module_name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[module_name]
        raise
    return module
