"""A docker compose project driven from a test: up, scale, kill, run, and down with nothing left.

Every call has a timeout; every container, network and volume carries the project's label,
so `leftovers()` can prove that `down()` removed them all.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class ComposeError(RuntimeError):
    pass


def engine_problem() -> str | None:
    """Why no Docker engine with compose v2 is usable here, or None."""
    for argv in (["docker", "info", "--format", "{{.ServerVersion}}"],
                 ["docker", "compose", "version", "--short"]):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"{' '.join(argv)}: {err}"
        if done.returncode != 0:
            return f"{' '.join(argv)}: {(done.stderr or done.stdout).strip()[:300]}"
    return None


@dataclass
class Compose:
    project: str
    files: Sequence[Path]
    env_file: Path
    # Every command names these, so `down` also removes the services only a profile starts.
    profiles: Sequence[str] = ()
    log: list[str] = field(default_factory=list)

    def _argv(self, *args: str) -> list[str]:
        files = [a for f in self.files for a in ("-f", str(f))]
        profiles = [a for p in self.profiles for a in ("--profile", p)]
        return ["docker", "compose", "-p", self.project, "--project-directory", str(ROOT),
                "--env-file", str(self.env_file), *files, *profiles, *args]

    def run(self, *args: str, timeout_s: float = 300.0, check: bool = True) -> str:
        argv = self._argv(*args)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              check=False, cwd=ROOT)
        self.log.append(f"$ docker compose {' '.join(args)} -> {done.returncode}")
        if check and done.returncode != 0:
            raise ComposeError(f"docker compose {' '.join(args)} exited {done.returncode}:\n"
                               f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        return done.stdout

    def up(self, services: Sequence[str], timeout_s: float = 900.0) -> None:
        """Start the services and wait until each is healthy (or running, without a check)."""
        self.run("up", "-d", "--no-build", "--wait", "--wait-timeout", str(int(timeout_s)),
                 *services, timeout_s=timeout_s + 60)

    def scale(self, service: str, n: int) -> None:
        self.run("up", "-d", "--no-build", "--no-recreate", "--scale", f"{service}={n}",
                 service, timeout_s=300)

    def containers(self, service: str) -> list[str]:
        """The running containers of a service."""
        return self.run("ps", "-q", service).split()

    def logs(self, service: str, tail: int = 40) -> str:
        return self.run("logs", "--no-color", "--tail", str(tail), service, check=False)

    def down(self) -> None:
        self.run("down", "-v", "--remove-orphans", "-t", "10", timeout_s=300, check=False)

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes of this project still on the engine."""
        label = f"label=com.docker.compose.project={self.project}"
        return {kind: [x for x in docker(kind, "ls", "-q", "--filter", label, *extra).split() if x]
                for kind, extra in (("container", ["-a"]), ("network", []), ("volume", []))}


def docker(*args: str, timeout_s: float = 120.0) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise ComposeError(f"docker {' '.join(args)}: {done.stderr.strip()[:500]}")
    return done.stdout.strip()
