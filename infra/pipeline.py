"""The pipeline's worker processes in the background, like the embedded stack's servers.

`webgym pipeline up` starts one of each (browser, policy, evaluator, history and metrics)
with the current settings as `python -m webgym_cli -v worker <name>` and waits until every
one it started is ready; `webgym pipeline down` (and `webgym infra down`) stops them.
A process is ready once it has written its ready file (WEBGYM_READY_FILE, see
webgym_common.lifecycle.mark_ready): reading the file, not the log, is the contract.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from infra.procs import InfraError, ManagedProcess
from webgym_common.config import Settings, settings_env
from webgym_common.lifecycle import READY_FILE_ENV

# name -> (module that must exist, CLI arguments after `webgym`)
PROCESSES = {
    "browser": ("producers.browser.worker", ["worker", "browser"]),
    "policy": ("processors.policy.app", ["worker", "policy"]),
    "evaluator": ("processors.evaluator.app", ["worker", "evaluator"]),
    "history": ("processors.history", ["worker", "history"]),
    "metrics": ("processors.metrics", ["worker", "metrics"]),
}


@dataclass(frozen=True)
class ProcessStatus:
    name: str
    pid: int | None  # None: not running
    ready: bool
    log_file: Path


def available() -> list[str]:
    return [n for n, (module, _) in PROCESSES.items() if importlib.util.find_spec(module)]


def command(name: str) -> list[str]:
    return [sys.executable, "-m", "webgym_cli", "-v", *PROCESSES[name][1]]


def _proc(settings: Settings, name: str) -> ManagedProcess:
    return ManagedProcess(f"pipeline-{name}", settings.infra.data_dir)


def ready_file(settings: Settings, name: str) -> Path:
    return _proc(settings, name).pid_file.with_suffix(".ready")


def is_ready(settings: Settings, name: str) -> bool:
    return ready_file(settings, name).exists()


async def up(settings: Settings, timeout_s: float = 120.0) -> list[str]:
    """Start every pipeline process not running; wait until those started are ready."""
    started = []
    env = settings_env(settings)
    for name in available():
        proc = _proc(settings, name)
        if proc.pid() is None:
            proc.log_file.unlink(missing_ok=True)
            ready = ready_file(settings, name)
            ready.unlink(missing_ok=True)
            proc.start(command(name), env={**env, READY_FILE_ENV: str(ready)})
            started.append(name)
    deadline = time.monotonic() + timeout_s
    for name in started:
        proc = _proc(settings, name)
        while not is_ready(settings, name):
            if proc.pid() is None:
                raise InfraError(f"pipeline {name} exited: see {proc.log_file}\n"
                                 + proc.log_tail())
            if time.monotonic() > deadline:
                raise InfraError(f"pipeline {name} not ready in {timeout_s:.0f}s ({proc.log_file})")
            await asyncio.sleep(0.5)
    return started


def down(settings: Settings) -> list[str]:
    stopped = [n for n in PROCESSES if _proc(settings, n).stop(settings.infra.stop_timeout_s)]
    for name in PROCESSES:
        ready_file(settings, name).unlink(missing_ok=True)
    return stopped


def status(settings: Settings) -> list[ProcessStatus]:
    rows = []
    for name in available():
        proc = _proc(settings, name)
        pid = proc.pid()
        rows.append(ProcessStatus(name, pid, pid is not None and is_ready(settings, name),
                                  proc.log_file))
    return rows
