"""Driving the supervised pipeline through the CLI, as a user would, and reading its files."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.hosts import Host
from webgym_common.config import Settings, settings_env

# The columns of `webgym cluster status`.
CLUSTER_COLUMNS = ("process", "actor", "state", "node id", "node ip", "restarts", "pid", "ready")


def webgym(settings: Settings, *args: str, timeout: float = 240,
           inside: Host | None = None) -> subprocess.CompletedProcess:
    """`webgym ARGS` with these settings, output captured; run inside a namespace host
    (harness.hosts) when one is given."""
    env = {**os.environ, **settings_env(settings), "COLUMNS": "250",
           # Quick restarts, so a test does not wait for the default backoff.
           "WEBGYM_INFRA__RESTART_BACKOFF_S": "0.5"}
    argv = [sys.executable, "-m", "webgym_cli", *args]
    return subprocess.run(inside.command(argv) if inside else argv, env=env,
                          capture_output=True, text=True, timeout=timeout)


def cluster_rows(out: str) -> dict[str, dict[str, str]]:
    """`webgym cluster status`'s table: each actor's row by its column names."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == len(CLUSTER_COLUMNS) and cells[1].startswith("webgym-"):
            rows[cells[1]] = dict(zip(CLUSTER_COLUMNS, cells, strict=True))
    return rows


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
