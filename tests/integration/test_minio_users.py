"""Each service's own MinIO user (infra/minio_users.py) against a real MinIO: it can do what
its service does, through the same ObjectStore calls, and is refused the rest."""

from __future__ import annotations

import asyncio
import hashlib
import io
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from minio import Minio
from minio.error import S3Error

from infra import minio_server, minio_users
from infra.procs import ManagedProcess, free_port
from webgym_common.config import InfraSettings, S3Settings
from webgym_common.objectstore import ObjectStore

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Settings]:
    """A MinIO of its own, and its root user."""
    infra = InfraSettings(data_dir=tmp_path_factory.mktemp("minio"), minio_port=free_port(),
                          minio_console_port=free_port())
    if not minio_server.binary(infra).exists():
        pytest.skip("no MinIO binary built (webgym infra prepare)")
    s3 = S3Settings(endpoint=f"{infra.host}:{infra.minio_port}", access_key="webgym-root",
                    secret_key=secrets.token_hex(16))
    proc = ManagedProcess("minio", Path(infra.data_dir))
    minio_server.start(infra, s3, proc)
    try:
        deadline = time.monotonic() + 60
        while not asyncio.run(minio_server.healthy(s3.endpoint)):
            assert time.monotonic() < deadline, "MinIO did not start"
            time.sleep(0.3)
        yield s3
    finally:
        proc.stop(10)


@pytest.fixture(scope="module")
def users(root: S3Settings) -> dict[str, S3Settings]:
    passwords = {s: secrets.token_hex(12) for s in minio_users.ACCESS}
    minio_users.ensure(root, passwords)
    minio_users.ensure(root, passwords)  # again: the one-shot service may run twice
    return {s: root.model_copy(update={"access_key": minio_users.access_key(s),
                                       "secret_key": passwords[s]})
            for s in minio_users.ACCESS}


def client(s3: S3Settings) -> Minio:
    return Minio(s3.endpoint, access_key=s3.access_key, secret_key=s3.secret_key,
                 secure=False, region=s3.region)


def refused(call: object) -> bool:
    assert callable(call)
    try:
        call()
    except S3Error as err:
        return err.code == "AccessDenied"
    return False


def put(s3: S3Settings, key: str, data: bytes = b"x") -> None:
    client(s3).put_object(s3.bucket, key, io.BytesIO(data), len(data))


def get(s3: S3Settings, key: str) -> bytes:
    resp = client(s3).get_object(s3.bucket, key)
    try:
        return resp.read()
    finally:
        resp.close()
        resp.release_conn()


async def test_the_browser_only_writes_screenshots(users: dict[str, S3Settings]) -> None:
    browser = users["browser"]
    store = ObjectStore(browser)
    await store.ensure_bucket()  # made by the root user; the browser may not look
    shot = secrets.token_bytes(300_000)  # above the size that is looked up before the upload
    ref = await store.put_blob(shot, "image/png")
    assert ref.sha256 == hashlib.sha256(shot).hexdigest()
    assert await ObjectStore(users["evaluator"]).get_blob(ref.uri) == shot
    key = ref.uri.split("/", 3)[3]
    assert refused(lambda: get(browser, key))
    assert refused(lambda: put(browser, "sha256/00/prompt.json"))
    assert refused(lambda: put(browser, "models/webgym-policy/v1/adapter_model.safetensors"))
    assert refused(lambda: client(browser).remove_object(browser.bucket, key))
    assert refused(lambda: list(client(browser).list_objects(browser.bucket, recursive=True)))


async def test_the_policy_reads_screenshots_and_writes_prompts(
    users: dict[str, S3Settings],
) -> None:
    shot = await ObjectStore(users["browser"]).put_blob(b"jpeg bytes", "image/jpeg")
    policy = ObjectStore(users["policy"])
    assert await policy.get_blob(shot.uri) == b"jpeg bytes"
    prompt = await policy.put_blob(b'{"messages": []}', "application/json")
    assert await ObjectStore(users["replay"]).get_blob(prompt.uri) == b'{"messages": []}'
    assert refused(lambda: put(users["policy"], "sha256/00/fake.png"))
    for reader in ("evaluator", "replay", "monitor", "policy"):
        assert refused(lambda r=reader: put(users[r], "models/x/v1/f")), reader  # type: ignore[misc]


def test_checkpoints_are_the_trainers_and_read_by_the_model_loader(
    users: dict[str, S3Settings],
) -> None:
    trainer, loader = users["trainer"], users["model-loader"]
    key = "models/webgym-policy/v1/adapter_config.json"
    put(trainer, key, b"{}")
    names = [o.object_name for o in client(trainer).list_objects(
        trainer.bucket, prefix="models/webgym-policy/v1/", recursive=True)]
    assert names == [key]
    assert get(loader, key) == b"{}"
    assert refused(lambda: put(loader, key, b"tampered"))
    assert refused(lambda: get(users["browser"], key))
    assert refused(lambda: get(users["policy"], key))
    assert refused(lambda: list(client(trainer).list_objects(trainer.bucket, prefix="sha256/")))


def test_no_service_user_administers_the_store(users: dict[str, S3Settings]) -> None:
    for service, s3 in users.items():
        assert refused(lambda s=s3: client(s).make_bucket("another")), service  # type: ignore[misc]
