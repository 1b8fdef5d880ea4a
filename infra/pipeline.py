"""The pipeline's worker processes in the background, like the embedded stack's servers.

`webgym pipeline up` starts one of each (browser, policy, evaluator, history, metrics)
with the current settings; `webgym pipeline down` (and `webgym infra down`) stops them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time

from infra.procs import InfraError, ManagedProcess
from webgym_common.config import Settings, settings_env

# name -> (module that must exist, CLI arguments after `webgym`)
PROCESSES = {
    "browser": ("producers.browser.worker", ["worker", "browser"]),
    "policy": ("processors.policy.app", ["worker", "policy"]),
    "evaluator": ("processors.evaluator.app", ["worker", "evaluator"]),
    "history": ("processors.history", ["worker", "history"]),
    "metrics": ("processors.metrics", ["worker", "metrics"]),
}
READY_MARKERS = {"browser": "now owns", "policy": "Ready"}


def available() -> list[str]:
    return [n for n, (module, _) in PROCESSES.items() if importlib.util.find_spec(module)]


def _proc(settings: Settings, name: str) -> ManagedProcess:
    return ManagedProcess(f"pipeline-{name}", settings.infra.data_dir)


async def up(settings: Settings, timeout_s: float = 120.0) -> list[str]:
    started = []
    env = settings_env(settings)
    for name in available():
        proc = _proc(settings, name)
        if proc.pid() is None:
            proc.log_file.unlink(missing_ok=True)
            proc.start([sys.executable, "-m", "webgym_common", "-v", *PROCESSES[name][1]],
                       env=env)
            started.append(name)
    deadline = time.monotonic() + timeout_s
    for name, marker in READY_MARKERS.items():
        proc = _proc(settings, name)
        while marker not in proc.log_tail(10_000):
            if proc.pid() is None:
                raise InfraError(f"pipeline {name} exited: see {proc.log_file}\n"
                                 + proc.log_tail())
            if time.monotonic() > deadline:
                raise InfraError(f"pipeline {name} not ready in {timeout_s:.0f}s ({proc.log_file})")
            await asyncio.sleep(0.5)
    return started


def down(settings: Settings) -> list[str]:
    return [n for n in PROCESSES if _proc(settings, n).stop(settings.infra.stop_timeout_s)]


def status(settings: Settings) -> dict[str, int | None]:
    return {n: _proc(settings, n).pid() for n in available()}
