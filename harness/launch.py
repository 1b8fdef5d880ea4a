"""Start `webgym ...` pipeline processes as children with given settings (tests, benchmarks).

Each child is `python -m webgym_cli -v <args>` in its own session. It is ready once it
writes the file named by WEBGYM_READY_FILE (webgym_common.lifecycle.mark_ready), here
the log's name with `.ready`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from webgym_common.config import Settings, settings_env
from webgym_common.lifecycle import READY_FILE_ENV


class PipelineProcess:
    """A real `webgym <args>` process in its own session, its output in `log_path`."""

    def __init__(self, settings: Settings, args: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self.ready_file = log_path.with_suffix(".ready")
        self.ready_file.unlink(missing_ok=True)
        env = {**os.environ, **settings_env(settings), READY_FILE_ENV: str(self.ready_file)}
        self.log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webgym_cli", "-v", *args],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def is_ready(self) -> bool:
        """The process said it is serving (its consumer owns partitions)."""
        return self.ready_file.exists()

    def kill(self) -> None:
        """SIGKILL the process and its children: no goodbye, no commit, no hand-over."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout_s: float = 30) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


class BrowserWorkerProcess(PipelineProcess):
    def __init__(self, settings: Settings, contexts: int, log_path: Path) -> None:
        super().__init__(settings, ["worker", "browser", "--contexts", str(contexts)], log_path)

    def owns_partitions(self) -> bool:
        """The worker joined its group and was given its partitions (its ready file)."""
        return self.is_ready()
