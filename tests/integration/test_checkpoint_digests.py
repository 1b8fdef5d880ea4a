"""Checkpoint digests against the real object store: what the trainer uploads is what the
next run and the model loader get, and a file replaced in MinIO after the upload is used by
neither (the loader never even asks vLLM)."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import httpx
import pytest

from consumers.checkpoints import DigestMismatch
from consumers.model_loader import Loader
from consumers.model_servers import ModelServer
from consumers.trainer.app import download, upload
from consumers.trainer.run import TrainResult
from webgym_common.config import Settings
from webgym_common.objectstore import ObjectStore, parse_uri

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

FILES = {"adapter_config.json": b'{"r": 8, "peft_type": "LORA"}',
         "adapter_model.safetensors": b"\x00weights\x01" * 1000}


class RecordingVllm:
    """Answers load_lora_adapter and /v1/models as vLLM does; records every request."""

    def __init__(self) -> None:
        self.loaded: dict[str, str] = {}
        self.calls: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(f"{request.method} {request.url.path}")
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": n, "root": p}
                                                      for n, p in self.loaded.items()]})
        body = json.loads(request.content)
        self.loaded[body["lora_name"]] = body["lora_path"]
        return httpx.Response(200, text="Success")


def uploaded(store: ObjectStore, tmp_path: Path, prefix: str) -> tuple[str, dict[str, str]]:
    out = tmp_path / "output"
    out.mkdir()
    for name, data in FILES.items():
        (out / name).write_bytes(data)
    result = TrainResult(output_dir=out, adapter_files=sorted(out.iterdir()), metrics={},
                         steps=1, wall_s=1.0)
    return upload(store, result, prefix)


def replace(store: ObjectStore, uri: str, data: bytes) -> None:
    bucket, key = parse_uri(uri)
    store.client.put_object(bucket, key, io.BytesIO(data), len(data))


def model_loader(settings: Settings, store: ObjectStore, vllm: RecordingVllm) -> Loader:
    server = ModelServer("http://vllm/v1", "k", 5)
    server.http = httpx.AsyncClient(base_url="http://vllm/v1/", transport=httpx.MockTransport(vllm))
    return Loader(settings.model_copy(update={"model_loader": settings.model_loader.model_copy(
        update={"load_timeout_s": 2})}), store, [server])


async def test_a_checkpoint_replaced_after_its_upload_is_refused_by_the_next_run_and_the_loader(
        settings: Settings, tmp_path: Path) -> None:
    store = ObjectStore(settings.s3)
    await store.ensure_bucket()
    prefix = f"models/{settings.kafka.topic_prefix}/v1"
    uri, digests = await asyncio.to_thread(uploaded, store, tmp_path, prefix)
    assert sorted(digests) == sorted(FILES)

    # As uploaded: the next run's parent and the loader's adapter are the trainer's files.
    parent = await asyncio.to_thread(download, store, uri, tmp_path / "parent", digests)
    assert {p.name: p.read_bytes() for p in parent.iterdir()} == FILES
    vllm = RecordingVllm()
    loader = model_loader(settings, store, vllm)
    assert await loader.load("m", 1, uri, digests) is not None
    assert list(vllm.loaded) == ["m-v1"]

    # Someone with write access to the bucket swaps the weights under the same key.
    await asyncio.to_thread(replace, store, f"{uri}/adapter_model.safetensors", b"evil")
    with pytest.raises(DigestMismatch, match="adapter_model.safetensors has sha256"):
        await asyncio.to_thread(download, store, uri, tmp_path / "parent2", digests)
    vllm.calls.clear()
    assert await loader.load("m", 2, uri, digests) is None
    assert vllm.calls == [] and "m-v2" not in vllm.loaded
    assert not (Path(settings.infra.data_dir) / "adapters" / "m-v2").exists()
    for server in loader.servers.values():
        await server.http.aclose()
