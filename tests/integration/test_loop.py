"""The whole RL loop on real parts: rollouts -> scores -> replay -> LLaMA-Factory -> vLLM.

Real broker, MinIO, Chromium, vLLM (SmolLM2-135M on the CPU) and `llamafactory-cli` runs,
every pipeline process a real process. Half the episodes are demonstrations (teacher-forced
from the tasks' reference actions) so every iteration has successes to train on; the other
half are the vLLM policy's own. Outcomes are read from the topics.

- synchronous (max_staleness 0, WebGym): iteration 1 starts only once v1 is served, and
  every action the policy chose in it came from v1;
- asynchronous (max_staleness 1, AReaL / AsyncWebRL): iteration 1 starts at once on the base
  model while v1 trains; each run trains only on samples at most one version old.
Both publish and serve two versions, one ModelVersion per training run.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from harness.launch import BrowserWorkerProcess, PipelineProcess
from producers.catalog import run_tasks_load
from producers.controller.run import rollout
from webgym_common.choices import PolicyKind
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    Event,
    IterationStarted,
    ModelServed,
    ModelVersion,
    ReplaySample,
)
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_to_end
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
SANDBOX = Path("environments/tasks/sandbox_tasks.jsonl")
EPISODES = 4
ITERATIONS = 2


def loop_settings(settings: Settings, vllm_base: Settings, max_staleness: int) -> Settings:
    return settings.model_copy(update={
        "policy": vllm_base.policy.model_copy(update={"kind": PolicyKind.VLLM, "max_inflight": 4}),
        "vllm": vllm_base.vllm,
        "rollout": settings.rollout.model_copy(update={
            "train": True, "demonstration_share": 0.5, "seed": 7,
            "task_timeout_minutes": 1.5, "grace_period_s": 20.0, "cancel_wait_s": 20.0,
            "score_wait_s": 60.0}),
        "replay": settings.replay.model_copy(update={"samples_per_run": 8}),
        # Its own model name: the session's one vLLM must never see a served name twice.
        "trainer": settings.trainer.model_copy(update={
            "model_name": f"webgym-policy-{settings.kafka.topic_prefix}",
            "max_staleness": max_staleness, "max_steps": 2, "batch_size": 1,
            "cutoff_len": 512, "run_timeout_s": 900.0, "replay_wait_s": 120.0}),
    })


async def read_all(settings: Settings, topic: Topic) -> list[Event]:
    async with EventProducer(settings, client_id="loop-test") as producer, \
            EventConsumer(settings, [topic], None, producer, client_id="loop-count") as c:
        return [r.event for r in await read_to_end(c)]


async def wait_served(settings: Settings, version: int, timeout_s: float) -> list[ModelServed]:
    async with asyncio.timeout(timeout_s):
        while True:
            served = [e for e in await read_all(settings, Topic.MODELS_SERVED)
                      if isinstance(e, ModelServed)]
            if any(s.version >= version for s in served):
                return served
            await asyncio.sleep(2)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("max_staleness", [0, 1], ids=["sync", "async-k1"])
async def test_the_loop_trains_and_serves_two_versions(
    settings: Settings, vllm_base: Settings, tmp_path: Path, max_staleness: int,
) -> None:
    s = loop_settings(settings, vllm_base, max_staleness)
    quiet = Console(quiet=True)
    await run_tasks_load(s, SANDBOX, quiet)
    procs = [BrowserWorkerProcess(s, 4, tmp_path / "browser.log"),
             *(PipelineProcess(s, ["worker", *args], tmp_path / f"{args[0]}.log")
               for args in (["policy", "--kind", "vllm"], ["evaluator"], ["replay"],
                            ["trainer"], ["model-loader"]))]
    try:
        async with asyncio.timeout(180):
            while not all(p.is_ready() for p in procs):  # noqa: ASYNC110 (ready files)
                await asyncio.sleep(0.5)
        await rollout(s, "train", EPISODES, ITERATIONS, quiet)
        # The run after the last iteration: the second version, trained on iteration 1.
        await wait_served(s, ITERATIONS, 900)

        versions = [e for e in await read_all(s, Topic.MODELS) if isinstance(e, ModelVersion)]
        runs = Counter(v.run_id for v in versions)
        assert sorted({v.version for v in versions}) == [1, 2], versions
        assert all(n == 1 for n in runs.values()), runs  # one ModelVersion per run
        assert {v.version: v.parent_version for v in versions} == {1: 0, 2: 1}
        served = await wait_served(s, ITERATIONS, 10)
        name = s.trainer.model_name
        assert {m.served_name for m in served} >= {f"{name}-v1", f"{name}-v2"}

        samples = {e.sample_id: e for e in await read_all(s, Topic.REPLAY)
                   if isinstance(e, ReplaySample)}
        trained = {sid for v in versions for sid in v.sample_ids}
        assert trained and trained <= set(samples)  # every trained-on sample is in the log
        for v in versions:  # bounded staleness: nothing older than version - 1 - k
            for sid in v.sample_ids:
                tag = samples[sid].policy_version
                if tag.startswith("v"):
                    assert int(tag[1:]) >= v.parent_version - max_staleness, (sid, tag)

        control = await read_all(s, Topic.CONTROL)
        started = {e.iteration: e for e in control if isinstance(e, IterationStarted)}
        assert sorted(started) == [0, 1]
        actions = [e for e in await read_all(s, Topic.ACTIONS) if isinstance(e, ActionChosen)]
        by_iteration: dict[int, Counter[str]] = {0: Counter(), 1: Counter()}
        for a in actions:
            by_iteration[int(a.episode_id.split("-")[1][2:])][a.policy_version] += 1
        policy_tags = {i: {t for t in c if t != "teacher-forcing"}
                       for i, c in by_iteration.items()}
        assert policy_tags[0] <= {"base"}, by_iteration
        if max_staleness == 0:
            # Synchronous: iteration 1 began after v1 was served, so the policy used only v1.
            assert started[1].policy_version == "v1"
            assert policy_tags[1] <= {"v1"}, by_iteration
            assert policy_tags[1], f"the policy chose no action in iteration 1: {by_iteration}"
        else:
            # Asynchronous: iteration 1 did not wait for v1; its actions are base or v1.
            assert policy_tags[1] <= {"base", "v1"}, by_iteration
    finally:
        for p in procs:
            p.stop()
