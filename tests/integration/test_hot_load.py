"""Hot-loading trained adapters: real broker, MinIO, vLLM (CPU), model loader and policy.

A ModelVersion (a real PEFT LoRA adapter for SmolLM2-135M in MinIO) goes through a real
`webgym worker model-loader` into the real vLLM; once ModelServed says vLLM lists the
versioned name, the real vLLM policy process's next action carries the version, and the
policy's log shows vLLM reporting it answered as that adapter. Versions 1 and 2 get names
of their own (never reused); a full checkpoint is not served, and a loader SIGKILLed and
restarted announces nothing twice. The model name is the test's own: the session's vLLM
is shared, and a name once loaded is never loaded with other weights.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from harness.launch import PipelineProcess
from harness.lora import adapter_files, digests, upload
from harness.topic_reads import collected
from infra.vllm_server import model_dir
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    EpisodeRequested,
    Event,
    ModelServed,
    ModelVersion,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.objectstore import ObjectStore
from webgym_common.stream.bus import EventProducer
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


class Seen:
    """Every event on some topics, read from the beginning in the background."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    def actions(self, episode_id: str) -> dict[int, ActionChosen]:
        return {e.step: e for e in self.events
                if isinstance(e, ActionChosen) and e.episode_id == episode_id}

    def served(self) -> list[ModelServed]:
        return [e for e in self.events if isinstance(e, ModelServed)]


@contextlib.asynccontextmanager
async def seen(settings: Settings, producer: EventProducer) -> AsyncIterator[Seen]:
    async with collected(settings, producer, [Topic.ACTIONS, Topic.MODELS_SERVED],
                         "test-hot-load") as events:
        yield Seen(events)


async def until(check: Callable[[], bool], timeout_s: float, what: str,
                *procs: PipelineProcess) -> None:
    try:
        async with asyncio.timeout(timeout_s):
            while not check():
                for p in procs:
                    assert p.proc.poll() is None, p.log_text()[-3000:]
                await asyncio.sleep(0.2)
    except TimeoutError:
        tails = "\n".join(p.log_text()[-2000:] for p in procs)
        raise AssertionError(f"{what}: not after {timeout_s:.0f}s\n{tails}") from None


async def listed(settings: Settings) -> dict[str, str]:
    """vLLM's /v1/models: served name -> the directory it was loaded from."""
    async with httpx.AsyncClient(timeout=10) as http:
        resp = await http.get(f"{settings.policy.base_url}/models",
                              headers={"Authorization": f"Bearer {settings.policy.api_key}"})
    resp.raise_for_status()
    return {m["id"]: m["root"] for m in resp.json()["data"]}


async def greedy_reply(settings: Settings, model: str) -> str:
    async with httpx.AsyncClient(timeout=180) as http:
        resp = await http.post(f"{settings.policy.base_url}/chat/completions", json={
            "model": model, "max_tokens": 16, "temperature": 0,
            "messages": [{"role": "user", "content": "Name three colours of the sky."}]},
            headers={"Authorization": f"Bearer {settings.policy.api_key}"})
    resp.raise_for_status()
    assert resp.json()["model"] == model
    return str(resp.json()["choices"][0]["message"]["content"])


async def test_each_version_is_served_under_its_own_name_and_the_next_actions_carry_it(
    settings: Settings, producer: EventProducer, vllm_base: Settings, tmp_path: Path
) -> None:
    model = f"webgym-policy-{settings.kafka.topic_prefix}"
    s = settings.model_copy(update={
        "vllm": vllm_base.vllm,
        "policy": vllm_base.policy.model_copy(update={"max_tokens": 48, "max_inflight": 2}),
        "trainer": settings.trainer.model_copy(update={"model_name": model}),
    })
    store = ObjectStore(s.s3)
    await store.ensure_bucket()
    procs = [PipelineProcess(s, ["worker", "model-loader"], tmp_path / "loader.log"),
             PipelineProcess(s, ["worker", "policy", "--kind", "vllm"], tmp_path / "policy.log")]
    loader, policy = procs
    eid = f"ep-{uuid.uuid4().hex[:10]}"
    task = Task(task_id=f"task-{eid}", task_name="Find the price of the blue lamp.",
                domain="sandbox-test", website="http://sandbox.invalid/", difficulty=1)

    async def observe(step: int) -> None:
        await producer.publish(Topic.OBSERVATIONS, eid, StepObserved(
            episode_id=eid, task_id=task.task_id, step=step, url="http://sandbox.invalid/",
            viewport=Viewport(width=800, height=600)))

    try:
        async with seen(s, producer) as topics:
            await until(lambda: all(p.is_ready() for p in procs), 120, "ready", *procs)
            await producer.publish(Topic.EPISODES, eid, EpisodeRequested(
                episode_id=eid, task=task, iteration=0, split="train", max_steps=20,
                deadline=utc_now() + timedelta(minutes=30), policy_version="base"))
            await observe(0)
            await until(lambda: 0 in topics.actions(eid), 300, "the base model's action", policy)
            assert topics.actions(eid)[0].policy_version == "base"

            uris: dict[int, str] = {}
            for n in (1, 2):
                files = adapter_files(model_dir(s), seed=n)
                uris[n] = await asyncio.to_thread(upload, store.client, store.bucket,
                                                  f"checkpoints/{model}/run{n}", files)
                await producer.publish(Topic.MODELS, model, ModelVersion(
                    model_name=model, version=n, checkpoint_uri=uris[n],
                    base_model=str(model_dir(s)), finetuning_type="lora", run_id=f"run{n}",
                    parent_version=n - 1, file_sha256=digests(files)))
                await until(lambda n=n: len(topics.served()) == n, 120, f"v{n} served", loader)
                served = topics.served()[-1]
                name = f"{model}-v{n}"
                assert (served.model_name, served.version, served.served_name,
                        served.checkpoint_uri) == (model, n, name, uris[n])
                assert served.load_ms > 0
                adapters = Path(s.infra.data_dir) / "adapters" / name
                assert Path((await listed(s))[name]).parent == adapters
                # The policy switches when it reads ModelServed; the next decision is the new
                # version's, and vLLM says it answered as the new adapter.
                await until(lambda name=name: f"policy now uses {name}" in policy.log_text(),
                            60, f"the policy switched to {name}", policy)
                await observe(n)
                await until(lambda n=n: n in topics.actions(eid), 300, f"step {n}", policy)
                assert topics.actions(eid)[n].policy_version == f"v{n}"
                assert f"{eid} step {n}: served by {name} (v{n})" in policy.log_text()

            # Two names, two directories: nothing reused; and their weights are in effect.
            now = await listed(s)
            assert now[f"{model}-v1"] != now[f"{model}-v2"]
            replies = [await greedy_reply(s, m) for m in
                       (s.policy.model, f"{model}-v1", f"{model}-v2")]
            assert len(set(replies)) == 3, replies
            assert "answered as" not in policy.log_text()

            # A full checkpoint is not hot-loadable on the CPU: nothing is announced, and a
            # loader killed and restarted announces nothing again either.
            await producer.publish(Topic.MODELS, model, ModelVersion(
                model_name=model, version=3, checkpoint_uri=uris[2], base_model="x",
                finetuning_type="full"))
            await until(lambda: "full checkpoint" in loader.log_text(), 60, "v3 seen", loader)
            loader.kill()
            again = PipelineProcess(s, ["worker", "model-loader"], tmp_path / "loader2.log")
            procs.append(again)
            await until(lambda: "full checkpoint" in again.log_text(), 120, "v3 again", again)
            await asyncio.sleep(2)  # anything it were to announce would be read by now
            assert [(m.version, m.served_name) for m in topics.served()] == [
                (1, f"{model}-v1"), (2, f"{model}-v2")]
    finally:
        for p in procs:
            p.stop()
