"""Episodes of self-scoring pages (MiniWoB++) are scored from the page's reward: no judge,
never blocked; the request's environment and the completion's page_reward reach the
Episode through the evaluator's tables."""

from __future__ import annotations

from dataclasses import replace

import pytest

from processors.evaluator.decisions import scored_event
from processors.evaluator.reward import PAGE_VERSION, Question, Verdict, evaluate, scored_by_page
from processors.evaluator.trajectory import build_episode, request_record
from tests.factories import sample_event
from tests.unit.processors.evaluator.builders import TASK, episode
from webgym_common.events import EpisodeCompleted, EpisodeRequested, PageEnvironment

PAGE = replace(TASK, task_id="miniwob-click-button-3", fact_groups=(), definite_answer=None,
               environment="miniwob click-button, seed 3")


class NoJudge:
    version = "must-not-be-asked"

    async def ask(self, q: Question) -> Verdict:
        raise AssertionError(f"the judge was asked {q.kind} about a self-scoring page")


def page_episode(page_reward: float | None, termination: str = "max_steps",
                 reason: str | None = "the page ended its episode (raw reward 1)"):
    ep = episode(steps=1, termination=termination, answer=None, task=PAGE)
    return replace(ep, page_reward=page_reward, reason=reason)


@pytest.mark.parametrize("judge", [None, NoJudge()])
async def test_a_positive_page_reward_is_reward_1_without_a_judge(judge) -> None:
    j = await evaluate(page_episode(0.73), judge)
    assert (j.reward, j.is_blocked, j.crashed, j.judge_failed, j.submit) == (
        1.0, False, False, False, True)
    assert j.evaluation.startswith("[page] reward from the page (miniwob click-button, seed 3)")
    assert "raw reward 0.73, solved" in j.evaluation and j.evaluation.endswith("reward 1")
    assert j.submission_judgment == "the page (miniwob click-button, seed 3) gave raw reward 0.73"


@pytest.mark.parametrize("raw", [-1.0, 0.0])
async def test_zero_or_below_is_reward_0(raw: float) -> None:
    j = await evaluate(page_episode(raw, reason=None), NoJudge())
    assert j.reward == 0.0 and not j.crashed and not j.is_blocked
    assert f"raw reward {raw:g}, not solved (ended by max_steps)" in j.evaluation
    assert j.submit == (raw != 0)  # 0: the page never reached a verdict


async def test_no_page_reward_is_0_with_the_reason_and_counts_as_crashed() -> None:
    j = await evaluate(page_episode(None, "crashed", "page did not answer"), NoJudge())
    assert j.reward == 0.0 and j.crashed and not j.judge_failed and not j.submit
    assert "no reward from the page" in j.evaluation and "could not be read" in j.evaluation
    assert "ended by crashed: page did not answer" in j.evaluation
    # An episode timed out on a live page still has the page's verdict (0: not done).
    late = await evaluate(page_episode(0.0, "timeout", "the episode's deadline passed"), None)
    assert late.reward == 0.0 and not late.crashed


async def test_tasks_without_an_environment_are_judged_as_before() -> None:
    plain = episode()
    assert not scored_by_page(plain) and scored_by_page(page_episode(1.0))
    j = await evaluate(replace(plain, page_reward=1.0), None)  # a stray page_reward is ignored
    assert j.evaluation.startswith("the answer matches")


async def test_the_environment_and_page_reward_reach_the_episode_and_the_score() -> None:
    req = sample_event("EpisodeRequested")
    assert isinstance(req, EpisodeRequested)
    env = PageEnvironment(kind="miniwob", name="click-button", seed=3)
    req = req.model_copy(update={"task": req.task.model_copy(update={"environment": env})})
    record = request_record(req)
    assert record["environment"] == "miniwob click-button, seed 3"
    done = EpisodeCompleted(episode_id=req.episode_id, task_id=req.task.task_id,
                            iteration=0, split="test", steps=1, termination="max_steps",
                            worker_id="w", started_at=req.produced_at, page_reward=1.0)
    ep = build_episode(done, record, {}, {})
    assert ep.task.environment == "miniwob click-button, seed 3" and ep.page_reward == 1.0
    scored = scored_event(done, ep, await evaluate(ep, None), PAGE_VERSION)
    assert scored.reward == 1.0 and scored.evaluator_version == PAGE_VERSION
    old = {k: v for k, v in record.items() if k != "environment"}  # a record from before
    assert build_episode(done, old, {}, {}).task.environment is None
