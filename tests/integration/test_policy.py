"""The policy processor (faust) in the whole pipeline: real broker, browser, MinIO and vLLM."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from producers.drive_reference import episode_request
from tests.support.hand_fed import watch_episodes
from webgym_common.bus import EventProducer
from webgym_common.config import Settings
from webgym_common.objectstore import ObjectStore
from webgym_common.tasks import read_task_file
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
TASKS, _ = read_task_file(Path("infra/sandbox/tasks/sandbox_tasks.jsonl"))


def pick(*prefixes: str, per_site: int = 2) -> list:
    return [t for p in prefixes for t in [t for t in TASKS if t.task_id.startswith(p)][:per_site]]


async def request_all(producer: EventProducer, requests: list) -> None:
    for r in requests:
        await producer.publish(Topic.EPISODES, r.episode_id, r)


async def test_teacher_forcing_solves_sandbox_tasks_through_the_pipeline(
    settings: Settings, producer: EventProducer, start_worker, start_policy
) -> None:
    start_worker(4)
    start_policy("teacher")
    tasks = pick("shop-", "wiki-", "forum-", "travel-")
    requests = [episode_request(t, timeout_s=240) for t in tasks]
    await request_all(producer, requests)
    logs = await watch_episodes(settings, producer, [r.episode_id for r in requests], 300)
    for r in requests:
        log = logs[r.episode_id]
        assert len(log.completions) == 1, r.task.task_id  # exactly one end per episode
        done = log.completions[0]
        assert done.termination == "answer", (r.task.task_id, done.reason)
        assert done.answer == r.task.definite_answer
        assert sorted(log.actions) == list(range(len(r.task.reference_actions)))
        assert all(a[0].policy_version == "teacher-forcing" for a in log.actions.values())


async def test_vllm_policy_runs_episodes_with_valid_or_explicitly_invalid_actions(
    settings: Settings, producer: EventProducer, start_worker, start_policy, vllm_base
) -> None:
    start_worker(3)
    start_policy("vllm", vllm_base)
    requests = [episode_request(t, timeout_s=400, max_steps=4) for t in pick("shop-", "wiki-",
                                                                              per_site=1)]
    await request_all(producer, requests)
    logs = await watch_episodes(settings, producer, [r.episode_id for r in requests], 420)
    store = ObjectStore(settings.s3)
    for r in requests:
        log = logs[r.episode_id]
        assert len(log.completions) == 1
        done = log.completions[0]
        assert done.termination in ("answer", "max_steps"), done.reason
        # Every step the browser showed before the end got exactly one decision.
        decided = [s for s, o in log.observations.items() if not o.terminal]
        assert sorted(log.actions) == sorted(decided)
        for step, (action, *rest) in log.actions.items():
            assert not rest, f"step {step} decided twice"
            assert action.action.valid or (action.action.kind == "Invalid" and action.action.error)
            assert action.raw_response and action.prompt_tokens > 0 and action.latency_ms > 0
            assert action.policy_version == "base"
            prompt = json.loads(await store.get_blob(action.prompt_uri))
            assert r.task.task_name in prompt[-1]["content"]


async def test_killing_the_policy_processor_mid_episode_continues_from_its_table(
    settings: Settings, producer: EventProducer, start_worker, start_policy, vllm_base
) -> None:
    start_worker(2)
    first = start_policy("vllm", vllm_base)
    request = episode_request(pick("travel-", per_site=1)[0], timeout_s=600, max_steps=6)
    await request_all(producer, [request])

    async def actions_so_far() -> int:
        logs = await watch_episodes(settings, producer, [request.episode_id], 2, linger_s=0,
                                    partial_ok=True)
        return len(logs[request.episode_id].actions)

    async with asyncio.timeout(300):
        while await actions_so_far() < 2:  # noqa: ASYNC110 (polls the log)
            await asyncio.sleep(1)
    first.kill()
    start_policy("vllm", vllm_base)

    logs = await watch_episodes(settings, producer, [request.episode_id], 600)
    log = logs[request.episode_id]
    assert len(log.completions) == 1
    assert log.completions[0].termination in ("answer", "max_steps")
    steps = sorted(log.actions)
    assert steps == list(range(len(steps))) and len(steps) >= 3
    # A decision after the restart was made with the history from before it.
    last = log.actions[steps[-1]][-1]
    prompt = json.loads(await ObjectStore(settings.s3).get_blob(last.prompt_uri))
    text = prompt[-1]["content"]
    for earlier in steps[:-1]:
        assert f"Step {earlier}:" in text
    assert log.actions[0][0].action_string in text
