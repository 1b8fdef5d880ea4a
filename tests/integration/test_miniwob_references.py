"""MiniWoB++ reference sequences work where they are used: through the pipeline (a real
browser worker, the teacher-forcing policy process, the evaluator; one training task per
covered environment, each solved with page reward > 0 and score 1), and replayed in
Chromium on a deterministic subset (2 seeds per environment and split) the way the builder
verified them (environments/tasks/miniwob_references.py)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from playwright.async_api import Browser

from environments.tasks.miniwob_references import new_context, verify
from environments.tasks.miniwob_tasks import OUTPUT
from harness.launch import PipelineProcess
from producers.drive_reference import episode_request
from tests.support.chromium import chromium
from tests.support.sandbox import serving_sandbox
from webgym_common.config import Settings
from webgym_common.events import EpisodeCompleted, EpisodeScored, Task
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.readers import read_events
from webgym_common.tasks import read_task_file
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
TASKS = [t for t in read_task_file(OUTPUT)[0] if t.reference_actions]


def first_per_environment(split: str, per_env: int = 1) -> list[Task]:
    """The first `per_env` tasks with references of each environment in a split (file
    order: by seed), so the subset is the same on every run."""
    picked: dict[str, list[Task]] = defaultdict(list)
    for t in TASKS:
        env = t.environment
        if env is not None and t.split == split and len(picked[env.name]) < per_env:
            picked[env.name].append(t)
    return [t for ts in picked.values() for t in ts]


async def test_the_teacher_policy_solves_one_train_task_per_environment(
    settings: Settings, producer: EventProducer, start_worker, start_policy,
    evaluator: PipelineProcess,
) -> None:
    tasks = first_per_environment("train")
    worker = start_worker(4)
    policy = start_policy("teacher")
    async with asyncio.timeout(150):
        while not (worker.owns_partitions() and evaluator.is_ready()  # noqa: ASYNC110
                   and policy.is_ready()):
            await asyncio.sleep(0.2)
    requests = [episode_request(t, split="train", timeout_s=170) for t in tasks]
    for r in requests:
        await producer.publish(Topic.EPISODES, r.episode_id, r)
    scored = await read_events(settings, Topic.EPISODES_SCORED, len(tasks), producer,
                               timeout_s=170)
    completed = await read_events(settings, Topic.EPISODES_COMPLETED, len(tasks), producer,
                                  timeout_s=10)
    task_of = {r.episode_id: r.task.task_id for r in requests}
    pages = {r.event.episode_id: r.event for r in completed
             if isinstance(r.event, EpisodeCompleted)}
    failures = []
    for r in scored:
        score = r.event
        assert isinstance(score, EpisodeScored)
        done = pages[score.episode_id]
        if not (done.page_reward and done.page_reward > 0 and score.reward == 1.0):
            failures.append(f"{task_of[score.episode_id]}: page reward {done.page_reward}, "
                            f"score {score.reward}, {done.termination}: {done.reason}")
    assert not failures, "\n".join(failures)
    assert len(scored) == len(tasks)


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox_url() -> AsyncIterator[str]:
    async with serving_sandbox() as url:
        yield url


@pytest_asyncio.fixture(loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as b:
        yield b


async def test_references_replay_in_chromium(sandbox_url: str, browser: Browser) -> None:
    tasks = [t for split in ("train", "test", "ood") for t in first_per_environment(split, 2)]
    sem = asyncio.Semaphore(3)

    async def replay(task: Task) -> str | None:
        env = task.environment
        assert env is not None
        async with sem:
            context = await new_context(browser)
            try:
                await asyncio.wait_for(verify(
                    context, task.website.replace("{sandbox}", sandbox_url), env.seed,
                    task.reference_actions), 60)
                return None
            except Exception as err:  # noqa: BLE001 - reported below, all at once
                return f"{task.task_id}: {str(err).splitlines()[0] if str(err) else err!r}"
            finally:
                await asyncio.wait_for(context.close(), 15)

    failures = [f for f in await asyncio.gather(*(replay(t) for t in tasks)) if f]
    assert not failures, f"{len(failures)} of {len(tasks)}:\n" + "\n".join(failures)
