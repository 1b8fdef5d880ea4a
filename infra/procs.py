"""Background server processes the project starts itself: pid files, port checks, stop.

Each component runs detached in its own session (so `down` can signal its whole
process group) with its output in <data_dir>/logs/<name>.log and its pid in
<data_dir>/run/<name>.pid.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from webgym_common.telemetry import without_telemetry


class InfraError(RuntimeError):
    """A problem the user can fix; the CLI prints its message as one line."""


def require_tool(name: str, install_hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise InfraError(f"'{name}' is not installed or not on PATH: {install_hint}")
    return path


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_is_listening(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands out as the source port of outgoing connections."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1") -> int:
    return free_port_block(1, host)


def free_port_block(count: int, host: str = "127.0.0.1", tries: int = 200) -> int:
    """A port P with P .. P+count-1 all free (tests: a server's port, a Kafka cluster's ports).

    Drawn below the kernel's ephemeral range: a port from that range can be taken as the
    source port of any outgoing connection between our check and the server's bind (three
    Kafka nodes dialling each other while the third still starts did exactly that).
    """
    low, _ = ephemeral_range()
    top = min(low, 65536) - count
    bottom = 20000 if top > 21000 else 1024
    rng = random.SystemRandom()
    for _ in range(tries):
        base = rng.randrange(bottom, top)
        if all(port_is_free(host, base + i) for i in range(count)):
            return base
    raise InfraError(f"no {count} consecutive free ports on {host} in {bottom}..{top + count}")


def run_step(cmd: list[str], what: str, timeout_s: float = 3600) -> str:
    """Run one set-up step (a pip install, a build); its stdout, or an InfraError that names
    the step and the last lines it printed."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env=without_telemetry(os.environ))
    except subprocess.TimeoutExpired as e:
        raise InfraError(f"{what} timed out after {timeout_s:.0f} s") from e
    if proc.returncode != 0:
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
        raise InfraError(f"{what} failed: {tail}")
    return proc.stdout


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by us) is not alive for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True


@dataclass
class ManagedProcess:
    """One server process identified by name under a data directory."""

    name: str
    data_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "run" / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "logs" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def start(
        self, cmd: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> int:
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            proc = subprocess.Popen(
                list(cmd),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # No process the stack starts reports usage (webgym_common.telemetry).
                env=without_telemetry({**os.environ, **(env or {})}),
                cwd=cwd,
                start_new_session=True,
            )
        self.pid_file.write_text(str(proc.pid))
        return proc.pid

    def log_tail(self, lines: int = 15) -> str:
        """The log's last lines, after the first few ERROR/FATAL lines before them (a process
        that dies at start-up logs its cause early and then many lines of shutting down)."""
        try:
            text = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        tail = text[-lines:]
        causes = [line for line in text[:-lines] if " ERROR " in line or " FATAL " in line
                  or line.startswith(("ERROR", "FATAL", "Exception", "Caused by"))][:5]
        return "\n".join([*causes, *(["..."] if causes else []), *tail])

    def stop(self, timeout_s: float) -> bool:
        """SIGTERM the process group, SIGKILL what is left after `timeout_s`. True if it ran."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and pid_alive(pid):
                time.sleep(0.1)
            if not pid_alive(pid):
                break
        self.pid_file.unlink(missing_ok=True)
        return True
