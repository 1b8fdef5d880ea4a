"""The evaluator's pure logic: selection, aggregation, verdicts, rules, crash detection."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from processors.evaluator.judge import (
    LlmJudge,
    parse_verdict,
    render_evidence,
    render_question,
)
from processors.evaluator.outbox import Outbox
from processors.evaluator.reward import (
    Question,
    Verdict,
    evaluate,
    sample_evenly,
    select_screenshots,
)
from processors.evaluator.rules import answers_match, crash_reason, normalize_answer
from processors.evaluator.trajectory import (
    Episode,
    FactGroupRef,
    StepEvidence,
    TaskFacts,
    build_episode,
    expected_parts,
    page_excerpt,
    steps_in,
)
from webgym_common.config import load_settings
from webgym_common.events import EpisodeCompleted

TASK = TaskFacts(
    task_id="shop-001", task_name="What is the price of the Cobalt Pulse 311?",
    domain="sandbox-shop",
    fact_groups=(FactGroupRef(1, "Product page", ("The page shows Cobalt Pulse 311",)),
                 FactGroupRef(2, "Price", ("The price is $335.99", "It costs 335.99 dollars"))),
    definite_answer="$335.99",
)


def step(n: int, sha: str | None = None, action: str | None = "Click [1]", **kw) -> StepEvidence:
    return StepEvidence(step=n, url=f"http://shop.test/{n}", title=f"page {n}",
                        page_text=f"text of page {n}", screenshot_uri=f"s3://b/{sha or n}",
                        screenshot_sha256=sha or f"sha{n}", action_string=action,
                        action_kind=(action or "").split(" ")[0] or None, **kw)


def episode(steps: int = 3, termination: str = "answer", answer: str | None = "$335.99",
            task: TaskFacts = TASK, max_steps: int = 10, trajectory=None) -> Episode:
    traj = trajectory if trajectory is not None else tuple(
        step(i, action=f"ANSWER [{answer}]" if i == steps and answer else
             (None if i == steps else "Click [1]")) for i in range(steps + 1))
    return Episode(episode_id="ep-1", task=task, termination=termination, answer=answer,
                   steps_taken=steps, max_steps=max_steps, trajectory=traj)


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


async def test_a_judge_failure_is_recorded_and_scored_as_failure() -> None:
    j = await evaluate(episode(), FakeJudge(criterion_b="fail"))
    assert j.reward == 0.0 and "judge failed: APITimeoutError" in j.evaluation


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


@pytest.mark.parametrize(("answer", "expected", "match"), [
    ("$335.99", "335.99", True),
    ("USD 1,299.00", "$1299.00", True),
    ("32GB", "32 GB", True),
    ("  APS-C. ", "aps-c", True),
    ("Paris,\tFrance", "paris france", True),
    ("１２ items", "12 items", True),
    ("3.5", "35", False),
    ("$335.99", "$339.99", False),
    ("", "x", False),
    (None, "x", False),
])
def test_answer_normalization(answer: str | None, expected: str, match: bool) -> None:
    assert answers_match(answer, expected) is match


def test_normalized_form() -> None:
    assert normalize_answer("  The PRICE: $1,299.50!  ") == "the price 1299.50"


# -- crash rules -------------------------------------------------------------------------


def test_crash_rules_each_clause() -> None:
    ok = episode()
    assert crash_reason(ok, blocked=False) is None
    assert "browser crashed" in crash_reason(replace(ok, termination="crashed"), False)
    assert "empty" in crash_reason(episode(trajectory=()), False)
    bad_visit = (replace(step(0, action="Visit [notaurl]"), action_url="notaurl"), step(1))
    assert "invalid URL" in crash_reason(episode(steps=1, trajectory=bad_visit), False)
    blank = (replace(step(0), url="about:blank"), step(1, action="ANSWER [$335.99]"))
    assert "not a web page" in crash_reason(episode(steps=1, trajectory=blank), False)
    hole = (step(0), step(1, action=None), step(2, action="ANSWER [$335.99]"))
    assert "dummy (null) action" in crash_reason(episode(steps=2, trajectory=hole), False)
    short = episode(steps=4, termination="timeout", answer=None)
    assert "fewer than 10" in crash_reason(short, blocked=False)
    assert crash_reason(short, blocked=True) is None  # blocked is not crashed
    # Answered early, or ran out a step budget smaller than 10: not crashed.
    assert crash_reason(episode(steps=2), False) is None
    used_budget = episode(steps=4, termination="max_steps", answer=None, max_steps=4)
    assert crash_reason(used_budget, False) is None


# -- verdicts -------------------------------------------------------------------------


@pytest.mark.parametrize(("reply", "success"), [
    ("The page shows the price.\nVerdict: SUCCESS", True),
    ("The answer is not on any page.\nVerdict: NOT SUCCESS", False),
    ("analysis...\n**Verdict:** not success", False),
    ("Verdict - success.", True),
    ("first Verdict: SUCCESS, on reflection\nVerdict: NOT_SUCCESS", False),
])
def test_verdict_parsing(reply: str, success: bool) -> None:
    v = parse_verdict(reply)
    assert v.success is success and not v.reason


@pytest.mark.parametrize(
    "reply", ["SUCCESS!!! it works", "Verdict: UNSUCCESSFUL", "garbage \x00 ###", "", None])
def test_an_unparseable_or_missing_verdict_is_not_success_with_the_reason(reply) -> None:
    v = parse_verdict(reply)
    assert v.success is False and v.reason


def test_the_structured_output_label_is_not_part_of_the_analysis() -> None:
    v = parse_verdict("Analysis: the price is on the page\nVerdict: SUCCESS")
    assert v.success and v.analysis == "the price is on the page"


def test_blocking_verdicts_use_their_own_labels() -> None:
    assert parse_verdict("CAPTCHA wall.\nVerdict: BLOCKED", "BLOCKED", "NOT BLOCKED").success
    assert not parse_verdict("Verdict: NOT BLOCKED", "BLOCKED", "NOT BLOCKED").success


# -- prompts, trajectory records, the judge client ------------------------------------------


def test_evidence_carries_url_title_and_page_text_within_budget() -> None:
    steps = tuple(replace(step(i), page_text="x" * 900) for i in range(30))
    text = render_evidence(steps, page_chars=500, budget=3000)
    assert "Step 29: http://shop.test/29\nTitle: page 29" in text and "Page text:" in text
    assert "earlier steps left out" in text and len(text) < 3000 + 200
    assert page_excerpt('- link "Buy" [ref=e12] [cursor=pointer]\n\n- text: hi', 100) == (
        '- link "Buy"\n- text: hi')


def test_build_episode_orders_steps_and_knows_what_to_wait_for() -> None:
    done = EpisodeCompleted(episode_id="e", task_id="t", iteration=0, split="test", steps=2,
                            termination="answer", answer="x",
                            started_at=datetime(2026, 1, 1, tzinfo=UTC))
    obs = {s: {"url": f"http://a/{s}", "title": "", "text": "", "screenshot_uri": None,
               "screenshot_sha256": None, "screenshot_format": None} for s in (2, 0, 1)}
    acts = {s: {"action_string": "Wait", "kind": "Wait", "url": None, "valid": True,
                "thought": None, "memory_json": None, "raw_response": ""} for s in (1, 0, 2)}
    ep = build_episode(done, None, obs, acts)
    assert [s.step for s in ep.trajectory] == [0, 1, 2] and ep.submitted
    assert expected_parts(done) == (range(3), range(3))
    assert expected_parts(done.model_copy(update={"termination": "max_steps"})) == (
        range(3), range(2))
    # The episode's records in a table: from 0 through the ANSWER step and any beyond.
    table = {"e/0": {"a": 0}, "e/2": {"a": 2}, "e/3": {"a": 3}, "e/4": {"a": 4}, "f/1": {}}
    assert sorted(steps_in(table, done)) == [0, 2, 3, 4]


def test_table_changes_become_changelog_records_on_the_events_partition() -> None:
    class Table:
        class changelog_topic:  # noqa: N801 (stands in for faust's topic object)
            @staticmethod
            def get_topic_name() -> str:
                return "p-evaluator-scored-changelog"

    class Event:
        class message:  # noqa: N801
            partition = 3

    put, delete = Outbox._changelog(Event, [(Table, "ep-1", 1700), (Table, "ep-2", None)])
    assert put == ("p-evaluator-scored-changelog", b'"ep-1"', b"1700", 3)
    assert delete == ("p-evaluator-scored-changelog", b'"ep-2"', None, 3)  # a tombstone


async def test_an_unreachable_judge_is_a_recorded_failure() -> None:
    settings = load_settings(evaluator={"judge": "llm", "base_url": "http://127.0.0.1:9/v1",
                                        "model": "m", "timeout_s": 2, "retries": 0})
    verdict = await LlmJudge(settings).ask(Question("criterion_b", "criterion B", TASK, "x"))
    assert not verdict.success and verdict.failed and "judge failed" in verdict.reason
