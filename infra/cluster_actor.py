"""One pipeline process under a Ray actor: started, watched, and stopped with its process
group (`webgym cluster up`, infra/cluster.py).

Delivery semantics: none of its own. The actor starts `python -m webgym_cli -v worker <name>`
and, when it exits for any reason but `stop()`, kills what the process left in its group and
ends its own process with `os._exit(1)`: Ray sees an actor that died, not one that exited on
purpose (`ray.actor.exit_actor` would not be restarted), and restarts it, which starts the
process again. What the process had not committed it reads again after the restart.

On the actor's node, with the node's own paths: the node's Python (the interpreter Ray runs
its workers with, the venv `ray start` came from) and project root, the log, pid and ready
files under the settings' data dir (<data_dir>/logs/cluster-<actor>.log, <data_dir>/run/
cluster-<actor>.pid and .ready). The settings come as the WEBGYM_* variables of the launch
(webgym_common.config.settings_env), with the telemetry switches on top (RAY_USAGE_STATS_ENABLED=0
among them, webgym_common.telemetry).

No orphan worker: the process leads its own process group (its Chromium and driver are in
it) and gets SIGKILL when the actor's process dies (Linux's parent-death signal, set before
the process is exec'd), so an actor killed with `ray.kill` or by a crash takes its worker
along; a restarted actor first kills whatever group its predecessor's pid file still names;
`stop()` SIGTERMs the group and SIGKILLs what is left after `stop_timeout_s`.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra import pipeline
from infra.procs import ManagedProcess, pid_alive
from webgym_common.config import PROJECT_ROOT
from webgym_common.lifecycle import READY_FILE_ENV
from webgym_common.telemetry import without_telemetry

log = logging.getLogger("webgym.cluster")

# Exec'd as `python -c EXEC_WITH_PDEATHSIG <actor pid> <command...>`: SIGKILL on the actor's
# death (PR_SET_PDEATHSIG = 1 survives exec), unless the actor is already gone.
EXEC_WITH_PDEATHSIG = (
    "import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGKILL); "
    "os.getppid() == int(sys.argv[1]) or os._exit(1); os.execv(sys.argv[2], sys.argv[2:])")


@dataclass(frozen=True)
class Launch:
    """What an actor needs to run its process (infra.cluster.launch builds it)."""

    process: str  # the registry's name: `webgym worker <process>`
    actor: str  # webgym-<process>-<i>
    env: dict[str, str]  # the settings as WEBGYM_* variables, the telemetry switches
    data_dir: str  # the settings' infra.data_dir, read on the actor's node
    stop_timeout_s: float
    restart_backoff_s: float  # a restarted actor waits this long before it starts again


def worker_command(process: str) -> list[str]:
    """The process's command on this node: the supervisor's (this node's Python,
    `webgym worker <process>`)."""
    return pipeline.command(process)


def was_restarted() -> bool:
    """Whether Ray restarted this actor (its process died before)."""
    import ray

    return bool(ray.get_runtime_context().was_current_actor_reconstructed)


def node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


class ProcessActor:
    """A Ray actor class (infra.cluster wraps it with ray.remote): its process runs while
    it lives."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.files = ManagedProcess(f"cluster-{launch.actor}", Path(launch.data_dir))
        self.ready_file = self.files.pid_file.with_suffix(".ready")
        self.stopping = False
        self.files.stop(launch.stop_timeout_s)  # a group a killed predecessor left here
        if was_restarted():
            time.sleep(launch.restart_backoff_s)
        self.popen = self._spawn()
        atexit.register(self._kill_group)
        threading.Thread(target=self._watch, name="watch", daemon=True).start()

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.ready_file.unlink(missing_ok=True)
        self.files.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.files.pid_file.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-c", EXEC_WITH_PDEATHSIG, str(os.getpid()),
               *worker_command(self.launch.process)]
        env = {**os.environ, **self.launch.env, READY_FILE_ENV: str(self.ready_file)}
        with self.files.log_file.open("ab") as out:
            popen = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=PROJECT_ROOT,
                                     env=without_telemetry(env), start_new_session=True)
        self.files.pid_file.write_text(str(popen.pid))
        log.info("%s: started %s (pid %d)", self.launch.actor, self.launch.process, popen.pid)
        return popen

    def _watch(self) -> None:
        """When the process exits (and no stop asked for it), the actor dies with it."""
        code = self.popen.wait()
        if self.stopping:
            return
        log.warning("%s: %s exited (%s); the actor dies so that Ray restarts it",
                    self.launch.actor, self.launch.process, code)
        self._kill_group()
        self.ready_file.unlink(missing_ok=True)
        os._exit(1)

    def _kill_group(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    # -- what the driver calls --------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """The process's pid, whether it is ready, and where its log is on this node."""
        return {"pid": self.popen.pid, "alive": pid_alive(self.popen.pid),
                "ready": self.ready_file.exists(), "log": str(self.files.log_file),
                "node_id": node_id()}

    def log_tail(self, lines: int = 15) -> str:
        return self.files.log_tail(lines)

    def stop(self) -> bool:
        """Stop the process and its group for good (the actor is killed next): SIGTERM,
        SIGKILL after stop_timeout_s. True if it was running."""
        self.stopping = True
        ran = self.files.stop(self.launch.stop_timeout_s)
        self._kill_group()
        self.ready_file.unlink(missing_ok=True)
        return ran
