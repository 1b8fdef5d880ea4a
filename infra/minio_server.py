"""Embedded MinIO: built from source with `go install` (pinned), cached, on 127.0.0.1.

Its root user and password are the settings' s3.access_key and s3.secret_key (for the
embedded stack: generated once per data dir, webgym_common.config.stack_secrets), given in
its environment, never on its command line.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import httpx
from minio.error import S3Error

from infra.procs import InfraError, ManagedProcess, require_tool
from webgym_common.config import InfraSettings, S3Settings
from webgym_common.config.stack_secrets import secrets_file
from webgym_common.objectstore import ObjectStore

MODULE = "github.com/minio/minio"
# What MinIO answers a client whose user or password is not its own.
REFUSED_CREDENTIALS = frozenset({"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"})


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
    if not (s3.access_key and s3.secret_key):
        raise InfraError("MinIO needs a root user and password: set WEBGYM_S3__ACCESS_KEY and "
                         "WEBGYM_S3__SECRET_KEY, or leave WEBGYM_S3__ENDPOINT unset to use "
                         f"the ones generated in {secrets_file(infra.data_dir)}")
    exe = build(infra)
    data = infra.data_dir / "minio"
    data.mkdir(parents=True, exist_ok=True)
    env = {
        "MINIO_ROOT_USER": s3.access_key,
        "MINIO_ROOT_PASSWORD": s3.secret_key,
        "MINIO_BROWSER": "on",
        # No phoning home (update check, call-home): ManagedProcess.start adds
        # webgym_common.telemetry.NO_TELEMETRY to every process the stack starts.
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


async def ensure_bucket(s3: S3Settings, data_dir: Path) -> None:
    """The bucket, made if missing. A MinIO that refuses the settings' credentials was
    started with others (before webgym generated them, or with other WEBGYM_S3__* values):
    one clear error instead of every process failing later."""
    store = ObjectStore(s3)
    try:
        # The embedded stack's user is MinIO's root: listing every bucket checks the
        # credentials (ObjectStore.ensure_bucket lets a user that may not look at the bucket
        # through, and a refused HEAD carries no reason to tell the two apart).
        await asyncio.to_thread(store.client.list_buckets)
        await store.ensure_bucket()
    except S3Error as err:
        if err.code not in REFUSED_CREDENTIALS:
            raise
        raise InfraError(
            f"MinIO at {s3.endpoint} refuses the credentials of the settings ({err.code}): it "
            f"runs with others. `webgym infra down`, then `webgym infra up` starts it with "
            f"WEBGYM_S3__ACCESS_KEY / WEBGYM_S3__SECRET_KEY, else those of "
            f"{secrets_file(data_dir)}") from None
