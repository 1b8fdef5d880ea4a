"""Driving the supervised pipeline through the CLI, as a user would, and reading its files."""

from __future__ import annotations

import os
import subprocess
import sys

from webgym_common.config import Settings, settings_env


def webgym(settings: Settings, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """`webgym ARGS` with these settings, output captured."""
    env = {**os.environ, **settings_env(settings), "COLUMNS": "250",
           # Quick restarts, so a test does not wait for the default backoff.
           "WEBGYM_INFRA__RESTART_BACKOFF_S": "0.5"}
    return subprocess.run([sys.executable, "-m", "webgym_cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def pid_of(settings: Settings, name: str) -> int | None:
    try:
        return int((settings.infra.data_dir / "run" / f"pipeline-{name}.pid").read_text())
    except (OSError, ValueError):
        return None


def ready(settings: Settings, name: str) -> bool:
    return (settings.infra.data_dir / "run" / f"pipeline-{name}.ready").exists()


def row(status: str, name: str) -> str:
    """The line of `webgym pipeline status` that shows process `name`."""
    return next(ln for ln in status.splitlines() if f" {name} " in ln)
