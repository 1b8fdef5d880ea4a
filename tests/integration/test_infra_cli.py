"""`webgym infra up | status | down` as a user runs it: real processes, real ports."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from infra.procs import free_port, free_port_block, pid_alive, port_is_listening
from webgym_common.config import InfraSettings

pytestmark = pytest.mark.integration

WEBGYM = [sys.executable, "-m", "webgym_cli"]


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    ports = {
        "WEBGYM_INFRA__KAFKA_PORT": free_port(),
        "WEBGYM_INFRA__KAFKA_CONTROLLER_PORT": free_port(),
        "WEBGYM_INFRA__MINIO_PORT": free_port(),
        "WEBGYM_INFRA__MINIO_CONSOLE_PORT": free_port(),
        "WEBGYM_INFRA__SANDBOX_PORT": free_port(),
        "WEBGYM_VLLM__PORT": free_port(),
    }
    return {
        **os.environ,
        "WEBGYM_INFRA__HOME": str(InfraSettings().home),
        "WEBGYM_INFRA__DATA_DIR": str(data_dir),
        "COLUMNS": "200",
        **{k: str(v) for k, v in ports.items()},
        **extra,
    }


def webgym(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*WEBGYM, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def stack_ports(env: dict[str, str]) -> list[int]:
    return [int(v) for k, v in env.items() if k.startswith("WEBGYM_") and k.endswith("PORT")]


def test_up_status_down_leaves_nothing_running(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    try:
        up = webgym(env, "infra", "up")
        assert up.returncode == 0, up.stdout + up.stderr
        status = webgym(env, "infra", "status")
        assert status.returncode == 0, status.stdout
        for name in ("kafka", "minio"):
            line = next(ln for ln in status.stdout.splitlines() if f" {name} " in ln)
            assert "healthy" in line and "unhealthy" not in line
        assert "Apache Kafka 3.9.2" in status.stdout
        pids = [int(p.read_text()) for p in (tmp_path / "run").glob("*.pid")]
        assert len(pids) >= 2 and all(pid_alive(p) for p in pids)
        # Starting again is harmless: everything is already running.
        assert webgym(env, "infra", "up").returncode == 0
    finally:
        down = webgym(env, "infra", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "kafka" in down.stdout and "minio" in down.stdout
    assert not [p for p in stack_ports(env) if port_is_listening("127.0.0.1", p)]
    assert not any(pid_alive(p) for p in pids)
    after = webgym(env, "infra", "status")
    assert after.returncode == 1 and "stopped" in after.stdout


def test_a_taken_port_gives_one_clear_error_line(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", int(env["WEBGYM_INFRA__KAFKA_PORT"])))
        squatter.listen()
        result = webgym(env, "infra", "up", timeout=120)
    webgym(env, "infra", "down")
    assert result.returncode == 1
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert lines[-1].startswith("error: port ") and "taken" in lines[-1]
    assert "Traceback" not in result.stdout + result.stderr


def test_a_missing_tool_gives_one_clear_error_line(tmp_path: Path) -> None:
    # An empty cache forces a jar download, and a PATH without Maven makes it impossible.
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    env = cli_env(tmp_path / "data", WEBGYM_INFRA__HOME=str(tmp_path / "cache"),
                  PATH=str(bare_path))
    result = webgym(env, "infra", "up", timeout=60)
    assert result.returncode == 1
    out = (result.stdout + result.stderr).strip()
    assert "Traceback" not in out
    assert out.splitlines()[-1].startswith("error: 'mvn' is not installed")
    assert shutil.which("mvn") is not None  # the real machine does have it


def test_three_brokers_up_status_down(tmp_path: Path) -> None:
    base = free_port_block(6)
    env = cli_env(tmp_path, WEBGYM_INFRA__KAFKA_PORT=str(base),
                  WEBGYM_INFRA__KAFKA_CONTROLLER_PORT=str(base + 1))
    try:
        up = webgym(env, "infra", "up", "--brokers", "3")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "WEBGYM_INFRA__BROKERS=3" in up.stdout  # how the other commands learn of it
        # `status` and `down` find every node without being told how many there are.
        status = webgym(env, "infra", "status")
        assert status.returncode == 0, status.stdout
        for k in (1, 2, 3):
            line = next(ln for ln in status.stdout.splitlines() if f" kafka-{k} " in ln)
            assert f"127.0.0.1:{base + 2 * (k - 1)}" in line and "node" in line
            assert "healthy" in line and "unhealthy" not in line
        pids = [int((tmp_path / "run" / f"kafka-{k}.pid").read_text()) for k in (1, 2, 3)]
        # Another size while this one runs is refused with one line.
        other = webgym(env, "infra", "up")
        assert other.returncode == 1 and "a 3-broker Kafka runs" in other.stdout
    finally:
        down = webgym(env, "infra", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert all(f"kafka-{k}" in down.stdout for k in (1, 2, 3))
    assert not any(pid_alive(p) for p in pids)
    assert not [p for p in range(base, base + 6) if port_is_listening("127.0.0.1", p)]
