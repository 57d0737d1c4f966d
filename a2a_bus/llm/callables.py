"""Callables named in agent files: ``module:function`` or ``path.py:function``.

Modules are found with the project's one loader (:mod:`a2a_bus.runtime.modules`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from a2a_bus.llm.tools import FunctionTool
from a2a_bus.runtime.modules import ModuleLoadError, import_module, load_file


def callable_label(reference: str) -> str:
    """How messages name a callable: ``support_tools:search`` and ``./support_tools.py:search``
    are both ``support_tools.search`` (not the internal name a loaded file gets)."""
    target, _, attribute = reference.rpartition(":")
    if _is_path(target):
        target = Path(target).stem
    return f"{target}.{attribute}"


def resolve_callable(reference: str, base: Path) -> Callable[..., Any]:
    """``module:function`` or ``path.py:function`` (relative to ``base``)."""
    target, sep, attribute = reference.rpartition(":")
    if not sep or not target or not attribute:
        raise ValueError(f"expected module:function or path.py:function, got {reference!r}")
    obj: Any = _module(target, base)
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


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def _module(target: str, base: Path) -> ModuleType:
    """The module a callable reference names: a path, an importable module, or else a
    ``.py`` file of that name beside the agent file (``support_tools``)."""
    if _is_path(target):
        return load_file(base / target)
    try:
        return import_module(target)
    except ModuleLoadError as exc:
        local = base / (target.replace(".", "/") + ".py")
        if exc.missing and local.is_file():
            return load_file(local)
        raise
