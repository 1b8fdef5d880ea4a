"""The trainer against the real broker, MinIO and `llamafactory-cli` (SmolLM2-135M, LoRA, CPU).

Replay samples and an IterationClosed go in; a real trainer process trains a few steps in
LLaMA-Factory's own venv and publishes exactly one ModelVersion whose adapter is in MinIO.
Then the next iteration's run is SIGKILLed mid-training (after its first checkpoint, before
its results) and the trainer restarted: the same run id resumes in the same folder and is
published once. A trainer SIGKILLed after publishing and restarted publishes nothing again
(an empty third iteration, its parent's weights under v3, shows it has read everything).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from consumers.trainer.control import train_control
from consumers.trainer.llamafactory import run_id
from harness.launch import PipelineProcess
from infra import trainer_env
from infra.vllm_server import model_dir
from tests.support.catalog import publish_train_tasks
from webgym_common.choices import TrainMode
from webgym_common.config import Settings
from webgym_common.demonstrations import BANK_ITERATION
from webgym_common.events import (
    ChatMessage,
    Event,
    IterationClosed,
    ModelVersion,
    ReplaySample,
    TrainingProgress,
)
from webgym_common.objectstore import ObjectStore, parse_uri
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_to_end
from webgym_common.topics import Topic
from webgym_common.versions import control_model

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

RUN_S = 900  # bound on one tiny run (model load + 3 steps on 2 shared cores)

@pytest.fixture
def trainer_settings(settings: Settings) -> Settings:
    venv = trainer_env.venv_dir(settings)
    base = model_dir(settings)
    if not (venv / ".complete").exists() or not base.exists():
        pytest.skip("needs `webgym infra prepare --with-trainer --with-vllm` (LLaMA-Factory's "
                    "venv and SmolLM2-135M)")
    trainer = settings.trainer.model_copy(update={
        "model_name": f"trainer-{settings.kafka.topic_prefix}", "base_model": str(base),
        "max_steps": 3, "cutoff_len": 256, "batch_size": 1, "max_staleness": 0,
        "replay_wait_s": 30.0, "run_timeout_s": float(RUN_S)})
    replay = settings.replay.model_copy(update={"samples_per_run": 100})
    return settings.model_copy(update={"trainer": trainer, "replay": replay})


@pytest.fixture
def start_trainer(trainer_settings: Settings, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    procs: list[PipelineProcess] = []

    def start() -> PipelineProcess:
        log = tmp_path / f"trainer{len(procs)}.log"
        p = PipelineProcess(trainer_settings, ["worker", "trainer"], log)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


def samples(iteration: int, version: str, n: int) -> list[ReplaySample]:
    return [ReplaySample(
        sample_id=f"it{iteration}-e{i}:0", episode_id=f"it{iteration}-e{i}", task_id=f"t{i}",
        step=0, messages=[
            ChatMessage(role="system", content="You operate a web browser."),
            ChatMessage(role="user", content=f"Task: buy item {i}. Elements: [1] Buy [2] Back")],
        response=f"Thought: the Buy button.\nAction: Click [{1 + i % 2}]", reward=1.0,
        iteration=iteration, policy_version=version) for i in range(n)]


def closed(iteration: int) -> IterationClosed:
    return IterationClosed(iteration=iteration, split="train", requested=4, completed=4,
                           crashed=0, blocked=0, cancelled=0)


async def publish(producer: EventProducer, batch: list[ReplaySample], close: int) -> None:
    for s in batch:
        await producer.publish(Topic.REPLAY, s.sample_id, s)
    await producer.publish(Topic.CONTROL, str(close), closed(close))


async def topic_events(settings: Settings, producer: EventProducer, topic: Topic) -> list[Event]:
    async with EventConsumer(settings, [topic], None, producer, client_id="test-read") as c:
        return [r.event for r in await read_to_end(c)]


async def eventually(fetch: Callable[[], Awaitable[Any]], ok: Callable[[Any], bool], what: str,
                     timeout_s: float = RUN_S, alive: PipelineProcess | None = None) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not ok(value := await fetch()):
        if alive is not None and alive.proc.poll() is not None:
            raise AssertionError(f"{what}: the trainer died:\n{alive.log_text()[-3000:]}")
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: still {value!r}")
        await asyncio.sleep(0.3)
    return value


def checkpointed(output: Path) -> bool:
    """A whole checkpoint is there (transformers writes trainer_state.json last)."""
    for state in output.glob("checkpoint-*/trainer_state.json"):
        with contextlib.suppress(ValueError, OSError):
            json.loads(state.read_text())
            return True
    return False


def versions(events: list[Event]) -> list[ModelVersion]:
    return [e for e in events if isinstance(e, ModelVersion)]


@pytest.mark.timeout(4 * RUN_S)
async def test_one_version_per_run_through_sigkills(
        trainer_settings: Settings, producer: EventProducer, start_trainer: Any) -> None:
    s = trainer_settings
    models = lambda: topic_events(s, producer, Topic.MODELS)  # noqa: E731
    first = samples(0, "base", 7)
    # Two samples by reference (as a refilter writes them): one whose prompt is in MinIO, one
    # whose prompt is not there, left out of the rows and counted, never a crash.
    store = ObjectStore(s.s3)
    await store.ensure_bucket()
    stored = await store.put_blob(json.dumps([
        {"role": "system", "content": "You operate a web browser."},
        {"role": "user", "content": "Task: buy item 5, read by reference."}]).encode(),
        "application/json")
    first[5] = first[5].model_copy(update={"messages": [], "prompt_uri": stored.uri})
    first[6] = first[6].model_copy(update={
        "messages": [], "prompt_uri": f"s3://{s.s3.bucket}/sha256/00/{'0' * 64}.json"})
    await publish_train_tasks(producer, [x.task_id for x in first])  # the later ones' too
    await publish(producer, first, 0)

    trainer = start_trainer()
    got = await eventually(models, lambda ev: len(versions(ev)) >= 1, "v1", alive=trainer)
    [v1] = versions(got)
    ids = [x.sample_id for x in first]
    assert (v1.model_name, v1.version, v1.parent_version) == (s.trainer.model_name, 1, 0)
    assert v1.run_id == run_id(ids, 0, TrainMode.LORA_SFT)
    assert sorted(v1.sample_ids) == ids and v1.trained_on_iterations == [0]
    # On the CPU the trainer fine-tunes a float32 view of the stored model (trainer_env).
    assert (v1.mode, v1.finetuning_type, v1.base_model) == ("lora_sft", "lora",
                                                           trainer_env.base_model(s))
    assert v1.checkpoint_uri == f"s3://{s.s3.bucket}/models/{s.trainer.model_name}/v1"
    assert v1.metrics["samples"] == 6 and v1.metrics["steps"] == 3
    assert v1.metrics["left_out"] == 1  # it0-e6:0, its prompt missing
    data = (s.infra.data_dir / "training" / v1.run_id / "data.json").read_text()
    assert "Task: buy item 5, read by reference." in data and "buy item 6" not in data
    bucket, prefix = parse_uri(v1.checkpoint_uri)
    names = {o.object_name.rsplit("/", 1)[-1]
             for o in store.client.list_objects(bucket, prefix=prefix + "/", recursive=True)}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= names
    progress = [e for e in await topic_events(s, producer, Topic.TRAINING)
                if isinstance(e, TrainingProgress) and e.run_id == v1.run_id]
    states = [p.state for p in progress]
    assert states[0] == "started" and states[-1] == "finished" and "running" in states
    assert "failed" not in states

    # Iteration 1 (on v1) closes; its run is SIGKILLed after its first checkpoint.
    second = samples(1, "v1", 4)
    run2 = run_id([x.sample_id for x in second], 1, TrainMode.LORA_SFT)  # k = 0: only v1's
    output = s.infra.data_dir / "training" / run2 / "output"
    await publish(producer, second, 1)
    await eventually(lambda: asyncio.sleep(0, checkpointed(output)), bool,
                     "run 2's first checkpoint", alive=trainer)
    os.killpg(trainer.proc.pid, signal.SIGKILL)
    trainer.proc.wait(10)
    assert not (output / "all_results.json").exists(), "run 2 finished before the kill"
    assert len(versions(await models())) == 1

    restarted = start_trainer()
    got = await eventually(models, lambda ev: len(versions(ev)) >= 2, "v2", alive=restarted)
    v2 = versions(got)[1]
    assert (v2.version, v2.parent_version, v2.run_id) == (2, 1, run2)
    assert v2.metrics["steps"] == 3
    # the same folder, resumed from the checkpoint (LLaMA-Factory says so in the run's log)
    assert "Resuming training from" in (output.parent / "train.log").read_text(errors="replace")

    # Killed after publishing, restarted: nothing twice. An empty iteration 2 gets v3 (v2's
    # weights), which shows the restarted trainer has read and decided everything before.
    os.killpg(restarted.proc.pid, signal.SIGKILL)
    restarted.proc.wait(10)
    start_trainer()
    await producer.publish(Topic.CONTROL, "2", closed(2))
    await eventually(models, lambda ev: len(versions(ev)) >= 3, "v3")
    await asyncio.sleep(0)
    final = versions(await models())
    assert Counter(v.version for v in final) == {1: 1, 2: 1, 3: 1}
    assert Counter(v.run_id for v in final)[run2] == 1
    v3 = final[2]
    assert (v3.checkpoint_uri, v3.sample_ids, v3.metrics["samples"]) == (v2.checkpoint_uri, [], 0)


@pytest.mark.timeout(4 * RUN_S)
async def test_the_bank_only_control_continues_v1_on_the_bank_for_the_later_versions_steps(
        trainer_settings: Settings, producer: EventProducer, start_trainer: Any) -> None:
    s = trainer_settings
    models = lambda: topic_events(s, producer, Topic.MODELS)  # noqa: E731
    bank = [x.model_copy(update={"iteration": BANK_ITERATION, "policy_version": "demonstration"})
            for x in samples(BANK_ITERATION, "demonstration", 4)]
    first, second = samples(0, "base", 3), samples(1, "v1", 3)
    await publish_train_tasks(producer, {x.task_id for x in [*bank, *first, *second]})
    for x in bank:
        await producer.publish(Topic.REPLAY, x.sample_id, x)
    await publish(producer, first, 0)
    trainer = start_trainer()
    await eventually(models, lambda ev: len(versions(ev)) >= 1, "v1 (the warm start)",
                     alive=trainer)
    await publish(producer, second, 1)
    got = await eventually(models, lambda ev: len(versions(ev)) >= 2, "v2", alive=trainer)
    v1, v2 = versions(got)[:2]
    assert v2.metrics["steps"] == 3 and set(v1.sample_ids) >= {x.sample_id for x in bank}

    venv, base = trainer_env.venv_dir(s), trainer_env.base_model(s)
    control = await train_control(s, venv, base)
    assert (control.model_name, control.version, control.parent_version) == (
        control_model(s.trainer.model_name), 1, 1)
    assert sorted(control.sample_ids) == sorted(x.sample_id for x in bank)  # the bank alone
    assert control.metrics["steps"] == v2.metrics["steps"]  # the steps after the warm start
    assert control.checkpoint_uri == (
        f"s3://{s.s3.bucket}/models/{control_model(s.trainer.model_name)}/v1")
    bucket, prefix = parse_uri(control.checkpoint_uri)
    names = {o.object_name.rsplit("/", 1)[-1] for o in ObjectStore(s.s3).client.list_objects(
        bucket, prefix=prefix + "/", recursive=True)}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= names
    # asked again (a resumed curve): the published one, not a second run
    again = await train_control(s, venv, base)
    assert again.run_id == control.run_id
    lines = Counter((v.model_name, v.version) for v in versions(await models()))
    assert lines[(control.model_name, 1)] == 1 and lines[(s.trainer.model_name, 1)] == 1
