"""MiniWoB++ end to end: real Chromium on the package's pages (served by the sandbox), real
Kafka and MinIO, a real evaluator process. Scripted actions go through Kafka as ActionChosen
(producers/drive_reference.py), the page's own JavaScript decides the reward."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.launch import PipelineProcess
from producers.drive_reference import DrivenEpisode, drive, episode_request
from webgym_common.config import Settings
from webgym_common.events import EpisodeScored, ReferenceAction, StepObserved, Task
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.readers import read_events
from webgym_common.tasks import read_task_file
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
TASKS = {t.task_id: t for t in read_task_file(
    Path("environments/tasks/miniwob_tasks.jsonl"))[0]}


def scripted(task_id: str, *steps: ReferenceAction) -> Task:
    """The file's task with a scripted action sequence (the driver resolves it on the marks)."""
    return TASKS[task_id].model_copy(update={"reference_actions": list(steps)})


def click(name: str) -> ReferenceAction:
    return ReferenceAction(action="Click", role="button", name=name)


async def test_the_page_s_own_reward_scores_the_episode(
    settings: Settings, producer: EventProducer, start_worker, evaluator: PipelineProcess
) -> None:
    worker = start_worker(3)
    # click-button, seed 1005 (a test seed): 'Click on the "no" button.', next to "submit".
    solved = scripted("miniwob-click-button-1005", click("no"))
    failed = scripted("miniwob-click-button-1005", click("submit"))  # wrong on purpose
    typed = scripted("miniwob-enter-text-1003",  # 'Enter "Enola" ... and press Submit.'
                     ReferenceAction(action="Type", role="textbox", name="", text="Enola"),
                     click("Submit"))
    requests = [episode_request(t, split="test", timeout_s=150) for t in (solved, failed, typed)]
    async with asyncio.timeout(150):
        while not (worker.owns_partitions() and evaluator.is_ready()):  # noqa: ASYNC110
            await asyncio.sleep(0.2)
    episodes = await drive(settings, requests, producer, timeout_s=120)
    good, bad, form = episodes  # in the order requested

    # The page wrote the instruction (the seed fixes it) and the worker reported it at step 0.
    for ep, said in ((good, 'Click on the "no" button.'), (bad, 'Click on the "no" button.'),
                     (form, 'Enter "Enola" into the text field and press Submit.')):
        first = first_observation(ep)
        assert first.instruction == said, first.instruction
        assert "START" not in {m.name for m in first.marks}  # the overlay is gone
    for ep, steps in ((good, 1), (bad, 1), (form, 2)):
        done = ep.completed
        assert done is not None and done.termination == "max_steps" and done.steps == steps
        assert (done.reason or "").startswith("the page ended its episode"), done.reason
        last = max(ep.observations, key=lambda o: o.step)
        assert last.step == steps and last.terminal  # the page said done: no more steps
        # No action was stopped by the START overlay (it would say what covers the target).
        assert all(o.error is None for o in ep.observations), [o.error for o in ep.observations]
    assert good.completed and good.completed.page_reward == 1.0
    assert form.completed and form.completed.page_reward == 1.0
    assert bad.completed and bad.completed.page_reward == -1.0

    scores = {r.event.episode_id: r.event for r in await read_events(
        settings, Topic.EPISODES_SCORED, 3, producer, timeout_s=90)}
    assert isinstance(score := scores[good.episode_id], EpisodeScored)
    assert score.reward == 1.0 and score.evaluator_version == "page-v1"
    assert "reward from the page (miniwob click-button, seed 1005): raw reward 1" in (
        score.evaluation)
    assert not score.crashed and not score.is_blocked
    assert scores[form.episode_id].reward == 1.0
    miss = scores[bad.episode_id]
    assert miss.reward == 0.0 and "raw reward -1, not solved" in miss.evaluation
    assert not miss.crashed


def first_observation(ep: DrivenEpisode) -> StepObserved:
    return min(ep.observations, key=lambda o: o.step)
