"""Embedded MinIO: built from source with `go install` (pinned), cached, on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx

from infra.procs import InfraError, ManagedProcess, require_tool
from webgym_common.config import InfraSettings, S3Settings

MODULE = "github.com/minio/minio"


def binary(infra: InfraSettings) -> Path:
    return infra.cache_dir / "minio" / infra.minio_version / "minio"


def build(infra: InfraSettings) -> Path:
    """`go install` MinIO into the cache, once (a few minutes and ~2 GB of RAM)."""
    out = binary(infra)
    if out.exists():
        return out
    go = require_tool("go", "install Go >= 1.24 (https://go.dev/doc/install) and put it on PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOBIN": str(out.parent), "CGO_ENABLED": "0"}
    proc = subprocess.run(
        [go, "install", f"{MODULE}@{infra.minio_version}"],
        env=env, capture_output=True, text=True, timeout=3600,
    )
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise InfraError(f"could not build MinIO {infra.minio_version}: {' | '.join(tail)}")
    return out


def start(infra: InfraSettings, s3: S3Settings, proc: ManagedProcess) -> None:
    exe = build(infra)
    data = infra.data_dir / "minio"
    data.mkdir(parents=True, exist_ok=True)
    env = {
        "MINIO_ROOT_USER": s3.access_key,
        "MINIO_ROOT_PASSWORD": s3.secret_key,
        "MINIO_BROWSER": "on",
        # No phoning home from a closed network.
        "MINIO_UPDATE": "off",
        "MINIO_CI_CD": "1",
    }
    proc.start(
        [
            str(exe), "server", str(data),
            "--address", f"{infra.host}:{infra.minio_port}",
            "--console-address", f"{infra.host}:{infra.minio_console_port}",
            "--quiet",
        ],
        env=env,
    )


async def healthy(endpoint: str, timeout_s: float = 3.0) -> bool:
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            resp = await client.get(f"http://{endpoint}/minio/health/live")
        return resp.status_code == 200
    except httpx.HTTPError:
        return False
