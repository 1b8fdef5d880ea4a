"""The pipeline's worker processes in the background, supervised.

`webgym pipeline up` starts a supervisor (`webgym pipeline supervise`, infra.supervisor)
that runs one of each process (browser, policy, evaluator, history, metrics and replay;
with `rollout.train` also the trainer and the model loader; an optional process such as
the env server when its setting asks for it) as `python -m webgym_cli -v worker <name>`
with the current settings, and restarts one that dies, with backoff; `up` waits until
every one is ready. `webgym pipeline down` (and `webgym infra down`) stops the
supervisor, which stops them all first.
`webgym run` also starts the read-only monitor (`start_monitor`, not supervised: nothing
waits on it) and leaves it serving after the run; `down` stops it too.
A process is ready once it has written its ready file (WEBGYM_READY_FILE, see
webgym_common.lifecycle.mark_ready): reading the file, not the log, is the contract.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from infra import supervisor
from infra.procs import InfraError, ManagedProcess
from webgym_common.config import Settings, settings_env
from webgym_common.processes import PROCESSES as SPECS

# name -> (module that must exist, CLI arguments after `webgym`): from the process registry.
PROCESSES = {p.value: (spec.module, ["worker", p.value]) for p, spec in SPECS.items()}
# Run only when the loop trains (rollout.train): they need LLaMA-Factory's venv and vLLM.
TRAINING = frozenset(p.value for p, spec in SPECS.items() if spec.training)
# Run only when their setting ("section.field") asks for it: name -> that setting.
OPTIONAL = {p.value: spec.opt_in for p, spec in SPECS.items() if spec.opt_in is not None}
MONITOR = "monitor"  # started by `webgym run` beside the supervised processes
SUPERVISOR = "pipeline-supervisor"


@dataclass(frozen=True)
class ProcessStatus:
    name: str
    pid: int | None  # None: not running
    ready: bool
    log_file: Path
    restarts: int = 0  # by the supervisor since `up`
    last_exit: str = "-"  # how it last died ("exit 1", "SIGKILL"), "-" if never
    last_restart_at: float | None = None  # wall clock
    started: bool = True  # False: `up` did not start it (training off, or optional)


def available() -> list[str]:
    return [n for n, (module, _) in PROCESSES.items() if importlib.util.find_spec(module)]


def asked_for(settings: Settings, name: str) -> bool:
    """Whether an optional process's setting (OPTIONAL) asks `up` to start it."""
    section, field = OPTIONAL[name].split(".")
    value = getattr(getattr(settings, section), field)
    if not isinstance(value, bool):  # a registry typo must not start (or hide) a process
        raise TypeError(f"{name}: setting {OPTIONAL[name]} is not a bool: {value!r}")
    return value


def selected(settings: Settings) -> list[str]:
    """The processes `up` runs: every one there is, the training ones when the loop trains,
    the optional ones when their setting asks for them."""
    return [n for n in available()
            if (settings.rollout.train or n not in TRAINING)
            and (n not in OPTIONAL or asked_for(settings, n))]


def command(name: str) -> list[str]:
    return [sys.executable, "-m", "webgym_cli", "-v", *PROCESSES[name][1]]


def _proc(settings: Settings, name: str) -> ManagedProcess:
    return ManagedProcess(f"pipeline-{name}", settings.infra.data_dir)


def supervisor_proc(settings: Settings) -> ManagedProcess:
    return ManagedProcess(SUPERVISOR, settings.infra.data_dir)


def state_file(settings: Settings) -> Path:
    return supervisor_proc(settings).pid_file.with_suffix(".json")


def ready_file(settings: Settings, name: str) -> Path:
    return _proc(settings, name).pid_file.with_suffix(".ready")


def is_ready(settings: Settings, name: str) -> bool:
    return ready_file(settings, name).exists()


def write_spec(settings: Settings, names: list[str]) -> Path:
    """What the supervisor runs: each process's command and files, and its backoff."""
    infra = settings.infra
    spec = {
        "processes": [
            {"name": n, "cmd": command(n), "pid_file": str(_proc(settings, n).pid_file),
             "log_file": str(_proc(settings, n).log_file),
             "ready_file": str(ready_file(settings, n))}
            for n in names
        ],
        "state_file": str(state_file(settings)),
        "backoff_s": infra.restart_backoff_s,
        "backoff_max_s": infra.restart_backoff_max_s,
        "reset_after_s": infra.restart_reset_after_s,
        "stop_timeout_s": infra.stop_timeout_s,
    }
    path = supervisor_proc(settings).pid_file.with_suffix(".spec.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec, indent=1))
    return path


async def up(settings: Settings, timeout_s: float = 120.0) -> list[str]:
    """Start the supervisor and its processes unless it runs; wait until they are ready.

    A process that exits before it was ever ready fails `up` (with its log) and stops
    the rest: a start-up error is the user's to fix, not the supervisor's to retry.
    """
    sup = supervisor_proc(settings)
    if sup.pid() is not None:
        return []
    for name in PROCESSES:  # left running by a supervisor that was killed
        _proc(settings, name).stop(settings.infra.stop_timeout_s)
    names = selected(settings)
    for name in names:
        _proc(settings, name).log_file.unlink(missing_ok=True)
        ready_file(settings, name).unlink(missing_ok=True)
    state_file(settings).unlink(missing_ok=True)
    spec = write_spec(settings, names)
    sup.log_file.unlink(missing_ok=True)
    sup.start([sys.executable, "-m", "webgym_cli", "-v", "pipeline", "supervise", str(spec)],
              env=settings_env(settings))
    deadline = time.monotonic() + timeout_s
    for name in names:
        while not is_ready(settings, name):
            await asyncio.sleep(0.5)
            if sup.pid() is None:
                raise InfraError(f"the pipeline supervisor exited: see {sup.log_file}\n"
                                 + sup.log_tail())
            if supervisor.read_state(state_file(settings)).get(name, {}).get("last_exit") \
                    is not None:
                proc = _proc(settings, name)
                tail = proc.log_tail()
                down(settings)
                raise InfraError(f"pipeline {name} exited: see {proc.log_file}\n{tail}")
            if time.monotonic() > deadline:
                raise InfraError(f"pipeline {name} not ready in {timeout_s:.0f}s "
                                 f"({_proc(settings, name).log_file})")
    return names


def down(settings: Settings) -> list[str]:
    """Stop the supervisor (it stops its processes first), then anything it left, and the
    monitor."""
    running = [n for n in (*PROCESSES, MONITOR) if _proc(settings, n).pid() is not None]
    supervisor_proc(settings).stop(settings.infra.stop_timeout_s + 10)
    for name in PROCESSES:
        _proc(settings, name).stop(settings.infra.stop_timeout_s)
        ready_file(settings, name).unlink(missing_ok=True)
    _proc(settings, MONITOR).stop(settings.infra.stop_timeout_s)
    return running


def monitor_pid(settings: Settings) -> int | None:
    return _proc(settings, MONITOR).pid()


def monitor_url(settings: Settings) -> str:
    return f"http://{settings.monitor.host}:{settings.monitor.port}/"


async def start_monitor(settings: Settings, timeout_s: float = 60.0) -> str:
    """Start `webgym monitor` in the background unless ours runs; its URL once it answers.

    Raises InfraError (with its log) if it exits or does not answer in time, e.g. when
    another program holds the port."""
    proc = _proc(settings, MONITOR)
    url = monitor_url(settings)
    if proc.pid() is None:
        proc.log_file.unlink(missing_ok=True)
        proc.start([sys.executable, "-m", "webgym_cli", "monitor"], env=settings_env(settings))
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while time.monotonic() < deadline and proc.pid() is not None:
            try:
                async with http.get(url) as resp:
                    if resp.status == 200:
                        return url
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.5)
    tail = proc.log_tail()
    proc.stop(settings.infra.stop_timeout_s)
    raise InfraError(f"the monitor did not answer at {url} in {timeout_s:.0f} s:\n{tail}")


def supervisor_pid(settings: Settings) -> int | None:
    return supervisor_proc(settings).pid()


def started_by_up(settings: Settings) -> list[str]:
    """The processes the running (or last) `up` started: its supervisor's spec, else the
    ones `up` would start with these settings."""
    spec = supervisor_proc(settings).pid_file.with_suffix(".spec.json")
    try:
        return [p["name"] for p in json.loads(spec.read_text())["processes"]]
    except (OSError, ValueError, KeyError, TypeError):
        return selected(settings)


def status(settings: Settings) -> list[ProcessStatus]:
    """Every process there is, started by `up` or not."""
    state = supervisor.read_state(state_file(settings))
    started = set(started_by_up(settings))
    rows = []
    for name in available():
        proc = _proc(settings, name)
        pid = proc.pid()
        seen = state.get(name, {})
        rows.append(ProcessStatus(
            name, pid, pid is not None and is_ready(settings, name), proc.log_file,
            restarts=int(seen.get("restarts", 0)),
            last_exit=supervisor.describe_exit(seen.get("last_exit")),
            last_restart_at=seen.get("last_restart_at"),
            started=name in started or pid is not None,
        ))
    return rows
