"""Per-task and per-group outcomes, and version comparisons (outcomes.py)."""

from __future__ import annotations

import json

import pytest

from producers.controller.evaluate import BASELINE_EVAL_VERSION, evaluation_episode_id
from producers.controller.outcomes import (
    UNKNOWN_GROUP,
    GroupRow,
    TaskOutcome,
    compare_versions,
    group_table,
    task_outcomes,
)
from tests.factories import sample_event
from tests.unit.scored import scored
from webgym_common.choices import Split, Suite
from webgym_common.events import EvaluationResult, Task
from webgym_common.history import JUDGE_FAILED


def gen(task_id: str, template: str) -> Task:
    return Task(task_id=task_id, task_name="t", domain="d", website="{sandbox}/",
                difficulty=1, split="test", benchmark_name="webgym-sandbox-gen",
                extra_json=json.dumps({"template": template}))


TASKS = {t.task_id: t for t in (gen("a1", "A"), gen("a2", "A"), gen("b1", "B"), gen("b2", "B"))}


def result(version: int, task_ids: list[str]) -> EvaluationResult:
    ids = [evaluation_episode_id(Split.TEST, version, Suite.SANDBOX, 0, i, t, 2)
           for i, t in enumerate(task_ids)]
    base = sample_event("EvaluationResult")
    assert isinstance(base, EvaluationResult)
    return base.model_copy(update={"version": version, "suite": "sandbox", "split": "test",
                                   "episode_ids": ids})


def test_each_requested_episode_is_a_task_outcome_and_unscored_ones_fail() -> None:
    r = result(2, ["a1", "a2", "b1", "b2", "gone"])
    eid = dict(zip(["a1", "a2", "b1", "b2", "gone"], r.episode_ids, strict=True))
    scores = [scored(eid["a1"], split="test", reward=1.0),
              scored(eid["a2"], split="test", reward=0.0),
              scored(eid["b1"], split="test", reward=0.0, crashed=True),
              scored(eid["gone"], split="test", reward=1.0),
              scored("another-run", split="test", reward=1.0)]
    scores.append(scored(eid["b2"], split="test", reward=1.0).model_copy(
        update={"evaluation": JUDGE_FAILED}))  # the judge could not score it
    rows = task_outcomes(r, scores, TASKS)
    assert [(o.task_id, o.group, o.success) for o in rows] == [
        ("a1", "A", True), ("a2", "A", False), ("b1", "B", False), ("b2", "B", False),
        ("gone", UNKNOWN_GROUP, True)]
    assert {(o.version, o.suite, o.split) for o in rows} == {(2, "sandbox", "test")}


def outcome(version: int, task_id: str, success: bool, group: str = "A") -> TaskOutcome:
    return TaskOutcome(version, "sandbox", "test", group, task_id, success)


def test_the_group_table_counts_successes_per_group_and_version() -> None:
    rows = group_table([outcome(0, "a1", True), outcome(0, "a2", False),
                        outcome(1, "a1", True), outcome(1, "a2", True),
                        outcome(0, "b1", False, "B"), outcome(BASELINE_EVAL_VERSION, "a1", False)])
    assert rows == [GroupRow(-1, "sandbox", "test", "A", 0, 1),
                    GroupRow(0, "sandbox", "test", "A", 1, 2),
                    GroupRow(1, "sandbox", "test", "A", 2, 2),
                    GroupRow(0, "sandbox", "test", "B", 0, 1)]
    assert rows[1].success_rate == 0.5


def test_two_versions_are_compared_on_the_tasks_both_ran() -> None:
    v0 = [outcome(0, f"t{i}", i < 2) for i in range(10)] + [outcome(0, "only-v0", False)]
    v1 = [outcome(1, f"t{i}", i < 8) for i in range(10)] + [outcome(1, "only-v1", True)]
    test = compare_versions(v1, v0)
    assert (test.b, test.c) == (6, 0)  # t2..t7 only v1 solved; the unpaired tasks do not count
    assert test.p == pytest.approx(2 / 64)
    assert compare_versions(v0, v1).p == test.p and compare_versions(v0, v1).c == 6


def test_a_task_twice_in_one_version_cannot_be_paired() -> None:
    with pytest.raises(ValueError, match="twice"):
        compare_versions([outcome(1, "t", True), outcome(1, "t", False)], [outcome(0, "t", True)])
