"""Re-scoring: episodes rebuilt from the log's events, the evaluator's own reward, provenance,
agreement and Cohen's kappa; the LLM judge's flow against a fake OpenAI-compatible server."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from aiohttp import web

from processors.evaluator.judge import LlmJudge
from processors.reprocess.agreement import Provenance, agreement, cohen_kappa
from processors.reprocess.rescore import (
    episode_of,
    keypoint_steps,
    prompt_version,
    provenance,
    rescored,
    score_episode,
)
from tests.unit.scored import scored
from webgym_common.agent.actions import format_action, parse_action
from webgym_common.choices import JudgeKind
from webgym_common.config import load_settings
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeRequested,
    Event,
    FactGroup,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.history import JUDGE_FAILED
from webgym_common.logrange.bounds import LogRange
from webgym_common.logrange.episodes import EpisodeLog, collect, parts_range, select

RULES = Provenance("rules", "rules-v1", None, None, "run-1")


def episode_events(eid: str, answer: str, steps: int = 2, iteration: int = 1,
                   definite: str = "42") -> list[Event]:
    task = Task(task_id="t1", task_name="find it", domain="d", website="http://s/",
                difficulty=1, definite_answer=definite,
                evaluator_reference=[FactGroup(id=1, description="the number", facts=["42"])])
    out: list[Event] = [EpisodeRequested(
        episode_id=eid, task=task, iteration=iteration, split="train", max_steps=10,
        deadline=utc_now() + timedelta(minutes=5), policy_version="v1",
        interaction_mode="set_of_marks")]
    for step in range(steps + 1):
        out.append(StepObserved(episode_id=eid, task_id="t1", step=step, url=f"http://s/{step}",
                                title=f"page {step}", viewport=Viewport(width=800, height=600),
                                accessibility_tree=f'- text "the answer is {definite}"',
                                screenshot_sha256=f"h{step}"))
        action = parse_action(f"ANSWER [{answer}]" if step == steps else "Click [1]")
        out.append(ActionChosen(episode_id=eid, step=step, action=action,
                                action_string=format_action(action), raw_response="r",
                                policy_version="v1"))
    out.append(EpisodeCompleted(episode_id=eid, task_id="t1", iteration=iteration,
                                split="train", steps=steps, termination="answer",
                                answer=answer, started_at=utc_now()))
    return out


def log_of(*episodes: list[Event], rng: LogRange | None = None) -> EpisodeLog:
    log = EpisodeLog()
    for events in episodes:
        select(log, events[-1], rng or LogRange())
    for events in episodes:
        for e in events[:-1]:
            collect(log, e)
    return log


def test_kappa_matches_known_values() -> None:
    # The textbook table: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no -> p_o .7, p_e .5, k .4
    assert cohen_kappa(20, 5, 10, 15) == pytest.approx(0.4)
    assert cohen_kappa(10, 0, 0, 10) == 1.0
    assert cohen_kappa(0, 10, 10, 0) == pytest.approx(-1.0)
    assert cohen_kappa(5, 0, 0, 0) == 1.0  # all agree, no variation
    assert math.isnan(cohen_kappa(0, 0, 0, 0))


def test_agreement_counts_flips_and_keeps_judge_failures_apart() -> None:
    def new(eid: str, reward: float, failed: bool = False) -> Any:
        evaluation = f"{JUDGE_FAILED}: x" if failed else f"why {eid}\nreward {int(reward)}"
        return scored(eid, reward=reward).model_copy(update={"evaluation": evaluation,
                                                             "evaluator_version": "llm"})
    pairs = [(scored("a", reward=1.0), new("a", 1.0)), (scored("b", reward=0.0), new("b", 0.0)),
             (scored("c", reward=1.0), new("c", 0.0)), (scored("d", reward=0.0), new("d", 1.0)),
             (scored("e", reward=0.0), new("e", 0.0, failed=True)), (None, new("f", 1.0))]
    a = agreement(pairs)
    assert (a.both_success, a.both_failure, a.old_success_new_failure,
            a.old_failure_new_success) == (1, 1, 1, 1)
    assert a.unjudged_new == ["e"] and a.no_old_score == ["f"] and a.episodes == 6
    blocked = agreement([(scored("g", reward=1.0), new("g", 1.0).model_copy(
        update={"is_blocked": True}))])
    assert blocked.blocked_changed == ["g"] and blocked.both_success == 1
    assert [(f.episode_id, f.old_reward, f.new_reward, f.why) for f in a.flipped] == [
        ("c", 1.0, 0.0, "reward 0"), ("d", 0.0, 1.0, "reward 1")]
    assert a.kappa == pytest.approx(0.0)


def test_the_log_keeps_the_first_copy_of_each_part_of_selected_episodes_only() -> None:
    one, other = episode_events("e1", "42"), episode_events("e2", "41", iteration=2)
    log = log_of(one, other, rng=LogRange(iterations=frozenset({1})))
    assert list(log.completions) == ["e1"] and "e2" not in log.observations
    duplicate = one[1].model_copy(update={"url": "http://elsewhere/"})
    collect(log, duplicate)
    assert log.observations["e1"][0].url == "http://s/0" and log.steps("e1") == 3
    assert parts_range(log).start is not None


async def test_rescoring_rebuilds_the_episode_and_uses_the_evaluators_reward() -> None:
    cfg = load_settings().evaluator
    log = log_of(episode_events("e1", "42"), episode_events("e2", "41"))
    right = await score_episode(log, "e1", None, RULES, cfg)
    wrong = await score_episode(log, "e2", None, RULES, cfg)
    assert not isinstance(right, str) and not isinstance(wrong, str)
    assert right.reward == 1.0 and wrong.reward == 0.0 and "does not match" in wrong.evaluation
    assert [t.step for t in right.trajectory] == [0, 1, 2]
    assert (right.judge_kind, right.evaluator_version, right.rescore_run) == (
        "rules", "rules-v1", "run-1")
    assert right.judge_model is None and right.prompt_version is None


def test_an_episode_without_its_request_is_not_rescored() -> None:
    events = episode_events("e1", "42")
    log = log_of([e for e in events if not isinstance(e, EpisodeRequested)])
    assert "no EpisodeRequested" in str(episode_of(log, "e1", load_settings().evaluator))


def test_provenance_names_the_judge_and_its_prompts() -> None:
    assert provenance(JudgeKind.RULES, None, None, "run-1") == RULES
    assert prompt_version().startswith("judge-prompts-") and prompt_version() == prompt_version()


def test_keypoints_collapse_runs_of_one_screenshot() -> None:
    events = episode_events("e1", "42", steps=3)
    obs = [e for e in events if isinstance(e, StepObserved)]
    obs[1] = obs[1].model_copy(update={"screenshot_sha256": obs[0].screenshot_sha256})
    assert keypoint_steps(48)(obs) == [1, 2, 3]
    assert keypoint_steps(2)(obs) == [2, 3]


# -- the LLM judge against a fake OpenAI-compatible server ------------------------------


class FakeJudge:
    """/v1/chat/completions answering `reply` (`blocking` to the blocking check); counts the
    requests by kind."""

    def __init__(self, reply: str, blocking: str) -> None:
        self.reply, self.blocking, self.asked = reply, blocking, 0
        self.questions: list[str] = []

    async def complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        assert body["model"] == "judge-m" and body["messages"][0]["role"] == "system"
        self.asked += 1
        question = body["messages"][1]["content"]
        self.questions.append(question)
        is_blocking = "NOT BLOCKED" in body["messages"][0]["content"]
        return web.json_response({
            "id": "x", "object": "chat.completion", "created": 0, "model": "judge-m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant",
                                     "content": self.blocking if is_blocking else self.reply}}]})


@pytest.fixture
async def judge_server() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []

    async def start(reply: str, blocking: str = "Analysis: a shop page.\nVerdict: NOT BLOCKED"
                    ) -> tuple[FakeJudge, str]:
        fake, app = FakeJudge(reply, blocking), web.Application()
        app.router.add_post("/v1/chat/completions", fake.complete)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return fake, f"http://127.0.0.1:{port}/v1"

    yield start
    for r in runners:
        await r.cleanup()


def llm_settings(base_url: str) -> Any:
    return load_settings(evaluator={"judge": "llm", "base_url": base_url, "model": "judge-m",
                                    "timeout_s": 5, "retries": 0, "verdict_attempts": 2,
                                    "verdict_backoff_s": 0})


async def test_the_llm_judge_scores_with_webgyms_checks_and_records_its_provenance(
        judge_server: Any) -> None:
    fake, url = await judge_server("Analysis: it is there.\nVerdict: SUCCESS")
    settings = llm_settings(url)
    judge = LlmJudge(settings)
    prov = provenance(JudgeKind.LLM, judge, judge.model, "run-llm")
    log = log_of(episode_events("e1", "the answer is 42"))
    result = await score_episode(log, "e1", judge, prov, settings.evaluator)
    assert not isinstance(result, str)
    assert result.reward == 1.0 and not result.is_blocked, result.evaluation
    assert result.judge_kind == "llm" and result.judge_model == "judge-m"
    assert result.prompt_version == prompt_version() and result.rescore_run == "run-llm"
    # WebGym's structure: the blocking check, criterion B once, criterion A per fact group;
    # the definite answer ("42" is in "the answer is 42"? no: normalized, it is not equal)
    # is one more question.
    asked = "\n".join(fake.questions)
    assert fake.asked == 4 and "Criterion B" in asked and "fact group 1" in asked
    assert "definite answer" in asked


async def test_a_reply_without_a_verdict_line_is_a_reported_judge_failure_never_a_zero(
        judge_server: Any) -> None:
    fake, url = await judge_server("I think the agent did fine.", "No wall here.")
    settings = llm_settings(url)
    judge = LlmJudge(settings)
    prov = provenance(JudgeKind.LLM, judge, judge.model, "run-llm")
    log = log_of(episode_events("e1", "42"))
    result = await score_episode(log, "e1", judge, prov, settings.evaluator)
    assert not isinstance(result, str)
    assert result.evaluation.startswith(JUDGE_FAILED) and "no `Verdict:" in result.evaluation
    assert fake.asked == 2  # the blocking check, asked again (verdict_attempts), then reported
    a = agreement([(scored("e1", reward=0.0), result)])
    assert a.unjudged_new == ["e1"] and a.compared == 0 and not a.flipped


def test_rescored_keeps_the_page_provenance_for_self_scoring_pages() -> None:
    log = log_of(episode_events("e1", "42"))
    built = episode_of(log, "e1", load_settings().evaluator)
    assert not isinstance(built, str)
    done, episode = built
    page = episode.__class__(**{**episode.__dict__, "task": episode.task.__class__(
        **{**episode.task.__dict__, "environment": "miniwob x, seed 1"}), "page_reward": 1.0})
    from processors.evaluator.reward import by_page
    out = rescored(done, page, by_page(page), RULES)
    assert out.judge_kind == "page" and out.evaluator_version == "page-v1" and out.reward == 1.0
