"""Two vLLM replicas: real vLLM servers on the CPU (SmolLM2-135M, the session's and a second
one), a real broker, MinIO and `webgym worker model-loader` with policy.replicas naming both.

A ModelVersion (a real PEFT LoRA adapter in MinIO) is loaded into the replica that is up at
once, while the other, not started yet, holds back the announcement; started, it gets the
version, and ModelServed is published only then, with both replicas' /v1/models listing it
from the loader's directory. Restarted (vLLM forgets runtime adapters), the second replica
gets the version again from the loader's periodic check, and nothing is announced twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import cast

import pytest

from harness.launch import PipelineProcess
from harness.lora import adapter_files, digests, upload
from harness.replicas import Replica, listed
from harness.topic_reads import collected
from infra.vllm_server import model_dir
from webgym_common.config import Settings
from webgym_common.events import ModelServed, ModelVersion
from webgym_common.objectstore import ObjectStore
from webgym_common.stream.bus import EventProducer
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session"),
              pytest.mark.timeout(900)]  # two vLLM servers start, one of them twice


async def lists(url: str, name: str, key: str) -> bool:
    return name in await listed(url, key)


@contextlib.asynccontextmanager
async def announcements(settings: Settings, producer: EventProducer
                        ) -> AsyncIterator[list[ModelServed]]:
    """Every ModelServed, read from the beginning in the background."""
    async with collected(settings, producer, [Topic.MODELS_SERVED],
                         "test-vllm-replicas") as events:
        yield cast("list[ModelServed]", events)  # the topic holds nothing else


async def eventually(check: Callable[[], bool | Awaitable[bool]], timeout_s: float, what: str,
                     loader: PipelineProcess) -> None:
    deadline = time.monotonic() + timeout_s
    while not await holds(check()):
        assert loader.proc.poll() is None, loader.log_text()[-3000:]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout_s:.0f}s\n"
                                 f"{loader.log_text()[-3000:]}")
        await asyncio.sleep(0.5)


async def holds(answer: bool | Awaitable[bool]) -> bool:
    return await answer if inspect.isawaitable(answer) else bool(answer)


async def test_a_version_is_announced_once_every_replica_lists_it_and_reaches_a_restarted_one(
    settings: Settings, producer: EventProducer, vllm_base: Settings, tmp_path: Path
) -> None:
    model = f"webgym-policy-{settings.kafka.topic_prefix}"  # the session's vLLM is shared
    name = f"{model}-v1"
    a, b = vllm_base.policy.base_url, Replica(vllm_base, "vllm-replica-b")
    key = vllm_base.policy.api_key
    s = settings.model_copy(update={
        "vllm": vllm_base.vllm,
        "policy": vllm_base.policy.model_copy(update={"replicas": (a, b.url)}),
        "trainer": settings.trainer.model_copy(update={"model_name": model}),
        "model_loader": settings.model_loader.model_copy(update={"check_every_s": 2.0}),
    })
    store = ObjectStore(s.s3)
    await store.ensure_bucket()
    loader = PipelineProcess(s, ["worker", "model-loader"], tmp_path / "loader.log")
    adapters = Path(s.infra.data_dir) / "adapters" / name
    try:
        async with announcements(s, producer) as served:
            await eventually(loader.is_ready, 120, "ready", loader)
            files = adapter_files(model_dir(s), seed=1)
            uri = await asyncio.to_thread(upload, store.client, store.bucket,
                                          f"checkpoints/{model}/run1", files)
            await producer.publish(Topic.MODELS, model, ModelVersion(
                model_name=model, version=1, checkpoint_uri=uri, base_model=str(model_dir(s)),
                finetuning_type="lora", run_id="run1", parent_version=0,
                file_sha256=digests(files)))

            # The replica that is up loads it at once; the other, down, holds back ModelServed.
            await eventually(lambda: lists(a, name, key), 120, f"{name} on {a}", loader)
            await asyncio.sleep(3)
            assert served == [] and await listed(b.url, key) == {}

            # Started, it gets the version; ModelServed follows, and both list it by then.
            await b.start()
            await eventually(lambda: bool(served), 300, "ModelServed", loader)
            now = {url: await listed(url, key) for url in (a, b.url)}
            assert {url: Path(names[name]).parent for url, names in now.items()} == {
                a: adapters, b.url: adapters}, now
            assert [(e.version, e.served_name) for e in served] == [(1, name)]

            # Restarted, it has forgotten the adapter; the loader's check loads it again.
            b.stop()
            assert await listed(b.url, key) == {}
            await b.start()

            await eventually(lambda: lists(b.url, name, key), 120, f"{name} on {b.url} again",
                             loader)
            assert f"{name} is not served by {b.url}" in loader.log_text()
            await asyncio.sleep(3)
            assert len(served) == 1  # nothing announced again
    finally:
        loader.stop()
        b.stop()
