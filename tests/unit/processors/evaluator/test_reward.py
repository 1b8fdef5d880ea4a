"""The evaluator's scoring (reward.py): screenshot selection, aggregation of the judge's
verdicts into one reward, and scoring by the rules alone."""

from __future__ import annotations

from dataclasses import replace

from processors.evaluator.judge import render_question
from processors.evaluator.reward import (
    Question,
    Verdict,
    evaluate,
    sample_evenly,
    select_screenshots,
)
from processors.evaluator.trajectory import StepEvidence
from tests.unit.processors.evaluator.builders import TASK, episode, step
from webgym_common.history import JUDGE_FAILED


class FakeJudge:
    """Answers by question kind (and fact-group id); records what it was asked."""

    version = "fake-judge"

    def __init__(self, **answers: bool | str) -> None:
        self.answers = answers
        self.asked: list[Question] = []

    async def ask(self, q: Question) -> Verdict:
        self.asked.append(q)
        key = f"a{q.fact_group.id}" if q.fact_group else q.kind
        answer = self.answers.get(key, q.kind != "blocking")
        if answer == "fail":
            return Verdict(False, reason="judge failed: APITimeoutError", failed=True)
        return Verdict(bool(answer), analysis=f"fake analysis of {q.label}")


# -- selection -------------------------------------------------------------------


def test_selection_keeps_the_last_48_distinct_pages() -> None:
    steps = [step(i) for i in range(60)]
    picked = select_screenshots(steps)
    assert len(picked) == 48 and [s.step for s in picked] == list(range(12, 60))
    assert [s.step for s in select_screenshots(steps, limit=5)] == [55, 56, 57, 58, 59]


def test_selection_collapses_repeated_screenshots_and_skips_unobserved_steps() -> None:
    steps = [step(0), step(1, sha="same"), step(2, sha="same"), step(3),
             StepEvidence(step=4, observed=False, action_string="Click [2]")]
    assert [s.step for s in select_screenshots(steps)] == [0, 2, 3]


def test_blocking_sample_is_at_most_20_spread_over_the_trajectory() -> None:
    steps = [step(i) for i in range(48)]
    sample = sample_evenly(steps, 20)
    assert len(sample) == 20 and sample[0].step == 0 and sample[-1].step == 47
    assert len({s.step for s in sample}) == 20
    assert sample_evenly(steps[:7], 20) == steps[:7]
    assert [s.step for s in sample_evenly(steps, 1)] == [47]


# -- aggregation -------------------------------------------------------------------


async def test_every_check_passing_gives_reward_1() -> None:
    judge = FakeJudge()
    j = await evaluate(episode(), judge)
    assert j.reward == 1.0 and j.submit and not j.is_blocked and not j.crashed
    kinds = sorted(q.kind for q in judge.asked)
    # The answer matches the definite answer after normalization: no model call for it.
    assert kinds == ["blocking", "criterion_a", "criterion_a", "criterion_b"]
    assert "[criterion B] SUCCESS" in j.evaluation
    assert "[criterion A 2 (Price)] SUCCESS" in j.evaluation
    assert "[definite answer] SUCCESS" in j.evaluation
    assert "[blocking] NOT BLOCKED" in j.evaluation


async def test_criterion_b_failing_gives_0() -> None:
    j = await evaluate(episode(), FakeJudge(criterion_b=False))
    assert j.reward == 0.0 and "[criterion B] NOT SUCCESS" in j.evaluation
    assert j.submission_judgment.startswith("[criterion B] NOT SUCCESS")


async def test_each_fact_group_is_one_criterion_a_question_with_its_alternatives() -> None:
    judge = FakeJudge(a2=False)
    j = await evaluate(episode(), judge)
    assert j.reward == 0.0 and "[criterion A 2 (Price)] NOT SUCCESS" in j.evaluation
    groups = {q.fact_group.id: q for q in judge.asked if q.kind == "criterion_a"}
    assert set(groups) == {1, 2}
    text = render_question(groups[2], 500, 4000)
    assert "- The price is $335.99 OR\n- It costs 335.99 dollars" in text


async def test_a_wrong_definite_answer_asks_the_judge_and_fails_with_it() -> None:
    judge = FakeJudge(definite_answer=False)
    j = await evaluate(episode(answer="$339.99"), judge)
    assert j.reward == 0.0 and "[definite answer] NOT SUCCESS" in j.evaluation
    assert any(q.kind == "definite_answer" for q in judge.asked)
    # Criterion A/B may pass: the definite answer alone decides.
    assert (await evaluate(episode(answer="$339.99"), FakeJudge())).reward == 1.0


async def test_a_judge_failure_is_a_judge_failure_not_a_0_the_agent_earned() -> None:
    j = await evaluate(episode(), FakeJudge(criterion_b="fail"))
    assert j.judge_failed and j.reward == 0.0 and not j.crashed
    assert j.evaluation.startswith(f"{JUDGE_FAILED}: criterion B (judge failed: APITimeoutError)")
    assert "not counted as an attempt" in j.evaluation.splitlines()[0]
    assert "[criterion A 1 (Product page)] SUCCESS" in j.evaluation  # the rest is kept
    # The blocking check failing: nothing after it is asked, the score is a judge failure.
    judge = FakeJudge(blocking="fail")
    blocked = await evaluate(episode(), judge)
    assert blocked.judge_failed and blocked.evaluation.startswith(f"{JUDGE_FAILED}: blocking")
    assert [q.kind for q in judge.asked] == ["blocking"] and not blocked.is_blocked
    assert not (await evaluate(episode(), FakeJudge())).judge_failed


async def test_no_answer_is_not_judged_beyond_the_blocking_check() -> None:
    judge = FakeJudge()
    j = await evaluate(episode(steps=10, termination="max_steps", answer=None), judge)
    assert j.reward == 0.0 and not j.submit and not j.crashed
    assert [q.kind for q in judge.asked] == ["blocking"]


async def test_blocking_comes_from_the_browser_or_the_judge() -> None:
    judge = FakeJudge()
    blocked = episode(steps=0, termination="blocked", answer=None)
    j = await evaluate(blocked, judge)
    assert j.is_blocked and not j.crashed and j.reward == 0.0 and judge.asked == []
    j = await evaluate(episode(), FakeJudge(blocking=True))
    assert j.is_blocked and "[blocking] BLOCKED" in j.evaluation
    rules = await evaluate(blocked, None)
    assert rules.is_blocked and not rules.crashed


async def test_crashed_trajectories_are_not_judged() -> None:
    judge = FakeJudge()
    j = await evaluate(episode(steps=2, termination="crashed", answer=None), judge)
    assert j.crashed and j.reward == 0.0 and "crashed:" in j.evaluation
    assert [q.kind for q in judge.asked] == ["blocking"]


# -- the rule-based evaluator ----------------------------------------------------------


async def test_rules_reward_a_normalized_match_only() -> None:
    assert (await evaluate(episode(answer="335.99 $"), None)).reward == 1.0
    wrong = await evaluate(episode(answer="$339.99"), None)
    assert wrong.reward == 0.0 and "does not match" in wrong.submission_judgment
    no_reference = await evaluate(episode(task=replace(TASK, definite_answer=None)), None)
    assert no_reference.reward == 0.0
    assert "no definite answer to check against" in no_reference.evaluation
    unanswered = await evaluate(episode(steps=10, termination="max_steps", answer=None), None)
    assert unanswered.reward == 0.0 and not unanswered.submit
