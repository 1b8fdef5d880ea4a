"""The CLI in-process (typer's CliRunner): no servers; the processes it would run are fakes."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from webgym_common.config import get_settings


@pytest.fixture(autouse=True)
def fresh_settings() -> Iterator[None]:
    """Each test reads the environment it set (get_settings is cached per process)."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """A wide terminal: rich's help panels (webgym_cli.main keeps them above 100 columns)."""
    monkeypatch.setattr("typer.core.HAS_RICH", True)
    return CliRunner(env={"COLUMNS": "200"})


@pytest.fixture
def fake_module(monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, Any]]:
    """Install a stand-in for a module a command imports when it runs; returns its calls.

    `fake_module("processors.policy.app", "run_policy_worker")` makes that function record
    its arguments instead of starting a processor.
    """

    def install(name: str, *functions: str) -> dict[str, Any]:
        calls: dict[str, Any] = {}
        module = types.ModuleType(name)
        for fn in functions:
            def record(*args: Any, _fn: str = fn, **kwargs: Any) -> None:
                calls[_fn] = args
            setattr(module, fn, record)
        monkeypatch.setitem(sys.modules, name, module)
        return calls

    return install
