"""Keeps the pipeline's processes running: restart with backoff, record it, stop them all.

Delivery semantics: none of its own. A process that dies (exit, crash, SIGKILL) is
started again after a backoff, and the process's own recovery (committed offsets,
changelogs) makes the restart lose nothing; the supervisor only decides when.
On SIGTERM or SIGINT it stops restarting first, then SIGTERMs every child's process
group and SIGKILLs what is left after `stop_timeout_s`: nothing restarts after `down`.

`webgym pipeline up` writes a spec (infra.pipeline.write_spec) and starts
`webgym pipeline supervise <spec>` in the background. Each child runs in its own
session (a SIGKILL of one process group hits one process and its children), appends
to its log, has its pid in its pid file, and writes its ready file itself
(webgym_common.lifecycle.mark_ready); the file is removed when the child dies.
The state file (`pid`, `restarts`, `last_exit`, `last_restart_at` per process) is
rewritten atomically on every change; `webgym pipeline status` reads it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from webgym_common.lifecycle import READY_FILE_ENV
from webgym_common.telemetry import without_telemetry

log = logging.getLogger("webgym.supervisor")
POLL_S = 0.2


# -- decisions ----------------------------------------------------------------------


def restart_delay(failures: int, base_s: float, max_s: float) -> float:
    """Seconds before restart number `failures` in a row: base, doubling, at most max."""
    return min(max_s, base_s * 2.0 ** max(0, failures - 1))


def failures_in_a_row(previous: int, ran_s: float, reset_after_s: float) -> int:
    """Quick deaths in a row, this one included; a process that ran long enough starts over."""
    return 1 if ran_s >= reset_after_s else previous + 1


def describe_exit(code: int | None) -> str:
    """`returncode` as a person reads it: "exit 1", "SIGKILL", or "-" if it never ended."""
    if code is None:
        return "-"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


# -- the loop -----------------------------------------------------------------------


@dataclass
class Child:
    name: str
    cmd: list[str]
    pid_file: Path
    log_file: Path
    ready_file: Path
    popen: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0  # monotonic
    next_start_at: float = 0.0  # monotonic
    failures: int = 0
    restarts: int = 0
    last_exit: int | None = None
    last_restart_at: float | None = None  # wall clock
    ever_started: bool = field(default=False)

    def state(self) -> dict[str, Any]:
        return {"pid": self.popen.pid if self.popen else None, "restarts": self.restarts,
                "last_exit": self.last_exit, "last_restart_at": self.last_restart_at}


def run(spec_path: Path) -> None:
    """Supervise the processes in `spec_path` until SIGTERM/SIGINT, then stop them all."""
    spec = json.loads(spec_path.read_text())
    children = [Child(p["name"], p["cmd"], Path(p["pid_file"]), Path(p["log_file"]),
                      Path(p["ready_file"])) for p in spec["processes"]]
    state_file = Path(spec["state_file"])
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while not stopping:
            if _step(children, spec, time.monotonic()):
                write_state(state_file, children)
            time.sleep(POLL_S)
    finally:
        _stop_all(children, float(spec["stop_timeout_s"]))
        write_state(state_file, children)


def _step(children: list[Child], spec: dict[str, Any], now: float) -> bool:
    """Reap the dead and schedule their restart; start those whose time has come."""
    changed = False
    for c in children:
        if c.popen is not None and (code := c.popen.poll()) is not None:
            c.popen, c.last_exit = None, code
            c.failures = failures_in_a_row(c.failures, now - c.started_at,
                                           spec["reset_after_s"])
            delay = restart_delay(c.failures, spec["backoff_s"], spec["backoff_max_s"])
            c.next_start_at = now + delay
            c.ready_file.unlink(missing_ok=True)
            log.warning("%s exited (%s); restart in %.1fs", c.name, describe_exit(code), delay)
            changed = True
        if c.popen is None and now >= c.next_start_at:
            if c.ever_started:
                c.restarts += 1
                c.last_restart_at = time.time()
            pid = _spawn(c)
            c.started_at, c.ever_started = now, True
            log.info("%s started (pid %d, restarts %d)", c.name, pid, c.restarts)
            changed = True
    return changed


def _spawn(c: Child) -> int:
    c.ready_file.unlink(missing_ok=True)
    c.log_file.parent.mkdir(parents=True, exist_ok=True)
    with c.log_file.open("ab") as out:
        c.popen = subprocess.Popen(
            c.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=without_telemetry({**os.environ, READY_FILE_ENV: str(c.ready_file)}),
            start_new_session=True,
        )
    c.pid_file.write_text(str(c.popen.pid))
    return c.popen.pid


def _stop_all(children: list[Child], timeout_s: float) -> None:
    """SIGTERM every child's group, SIGKILL those left after `timeout_s`; clean their files."""
    running = [c.popen for c in children if c.popen is not None and c.popen.poll() is None]
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        for proc in running:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(p.poll() is None for p in running):
            time.sleep(0.1)
        running = [p for p in running if p.poll() is None]
        if not running:
            break
    for c in children:
        c.popen = None
        c.pid_file.unlink(missing_ok=True)
        c.ready_file.unlink(missing_ok=True)


def write_state(path: Path, children: list[Child]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({c.name: c.state() for c in children}))
    tmp.replace(path)


def read_state(path: Path) -> dict[str, dict[str, Any]]:
    """What the supervisor last wrote (empty if it never ran)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}

