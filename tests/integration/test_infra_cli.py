"""`webgym infra up | status | down` as a user runs it: real processes, real ports; the
credentials a fresh data dir gets, and what `up` refuses."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from minio import Minio
from minio.error import S3Error

from infra.procs import free_port, free_port_block, pid_alive, port_is_listening
from webgym_common.config import InfraSettings
from webgym_common.config.stack_secrets import read, secrets_file

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


def test_a_fresh_data_dir_gets_its_own_credentials_and_minio_takes_only_those(
    tmp_path: Path,
) -> None:
    env = cli_env(tmp_path)
    endpoint = f"127.0.0.1:{env['WEBGYM_INFRA__MINIO_PORT']}"
    try:
        up = webgym(env, "infra", "up")
        assert up.returncode == 0, up.stdout + up.stderr
        made = read(tmp_path)
        assert made is not None and "secrets.json" in up.stdout
        assert stat.S_IMODE(secrets_file(tmp_path).stat().st_mode) == 0o600
        ours = Minio(endpoint, made.minio_access_key, made.minio_secret_key, secure=False)
        assert ours.bucket_exists("webgym")  # made by `up` with the generated ones
        # The fixed defaults of earlier versions open nothing any more.
        with pytest.raises(S3Error) as refused:
            Minio(endpoint, "webgym", "webgym-secret", secure=False).bucket_exists("webgym")
        assert refused.value.code in ("InvalidAccessKeyId", "AccessDenied")
        # Every other process of the stack reads the same ones from the data dir.
        child = subprocess.run(
            [sys.executable, "-c", "from webgym_common.config import get_settings as g; "
             "s = g(); print(s.s3.access_key, s.s3.secret_key, s.policy.api_key)"],
            env=env, capture_output=True, text=True, timeout=60, check=True)
        assert child.stdout.split() == [made.minio_access_key, made.minio_secret_key,
                                        made.vllm_api_key]
        # Credentials other than those MinIO runs with: one clear line, not a traceback.
        other = webgym({**env, "WEBGYM_S3__ACCESS_KEY": "someone",
                        "WEBGYM_S3__SECRET_KEY": "s" * 24}, "infra", "up")
        assert other.returncode == 1 and "Traceback" not in other.stdout + other.stderr
        assert "refuses the credentials" in other.stdout
    finally:
        down = webgym(env, "infra", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert read(tmp_path) == made  # kept: the data in MinIO needs them next time


def test_a_public_host_without_chosen_credentials_is_refused_and_nothing_starts(
    tmp_path: Path,
) -> None:
    env = cli_env(tmp_path, WEBGYM_INFRA__HOST="0.0.0.0")
    result = webgym(env, "infra", "up", timeout=60)
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in out, out
    assert "WEBGYM_INFRA__HOST=0.0.0.0" in out and "WEBGYM_S3__SECRET_KEY" in out
    assert not list((tmp_path / "run").glob("*.pid"))
    assert not [p for p in stack_ports(env) if port_is_listening("127.0.0.1", p)]
