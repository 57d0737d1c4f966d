"""The package's public API: each name of ``a2a_bus.__all__``, loaded on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import a2a_bus
from a2a_bus.bus import Bus
from a2a_bus.client import AsyncClient, Client
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.protocol import JsonRpcError


def test_importing_the_package_loads_no_part_of_the_bus() -> None:
    probe = "import sys, a2a_bus; print(sorted(m for m in sys.modules if m.startswith('a2a_bus.')))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_every_public_name_is_the_object_its_module_defines() -> None:
    for name in a2a_bus.__all__:
        assert getattr(a2a_bus, name) is not None, name
    assert a2a_bus.Bus is Bus
    assert a2a_bus.Agent is Agent
    assert a2a_bus.method is method
    assert a2a_bus.JsonRpcError is JsonRpcError
    assert (a2a_bus.Client, a2a_bus.AsyncClient) == (Client, AsyncClient)
    assert set(a2a_bus.__all__) <= set(dir(a2a_bus))


def test_a_name_the_package_does_not_export_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        a2a_bus.Nope  # noqa: B018
