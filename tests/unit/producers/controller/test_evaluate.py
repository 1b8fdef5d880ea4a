"""What an evaluation decides (evaluate.py): its tasks, ids, requests, interval and result."""

from __future__ import annotations

import pytest

from producers.controller.evaluate import (
    EVAL_ITERATION,
    evaluation_episode_id,
    evaluation_request,
    evaluation_result,
    evaluation_runs,
    evaluation_tasks,
    wilson_interval,
)
from producers.controller.iteration import IterationState, task_id_of
from tests.unit.scored import scored
from webgym_common.config import Split, Suite, load_settings
from webgym_common.events import PageEnvironment, Task
from webgym_common.tasks import in_split, suite_of


def task(task_id: str, split: str | None, benchmark: str = "webgym-sandbox-gen",
         miniwob: bool = False, max_steps: int | None = None) -> Task:
    env = PageEnvironment(kind="miniwob", name="click-button", seed=1) if miniwob else None
    return Task(task_id=task_id, task_name="t", domain="d", website="{sandbox}/",
                difficulty=2, split=split, benchmark_name=benchmark, environment=env,
                max_steps=max_steps)


CATALOG = [task("a", "train"), task("b", "test"), task("c", "test"), task("d", "ood"),
           task("legacy", None, benchmark="webgym-sandbox"),
           task("m1", "test", benchmark="miniwob", miniwob=True),
           task("w1", "test", benchmark="webgym")]


def test_suites_come_from_the_environment_and_the_benchmark() -> None:
    assert [suite_of(t) for t in CATALOG] == [Suite.SANDBOX] * 5 + [Suite.MINIWOB, Suite.WEB]


def test_a_task_without_a_split_trains_and_tests_but_is_never_held_out() -> None:
    legacy = CATALOG[4]
    assert in_split(legacy, Split.TRAIN) and in_split(legacy, Split.TEST)
    assert not in_split(legacy, Split.OOD)
    assert not in_split(legacy, Split.TEST, strict=True)
    assert not in_split(CATALOG[1], Split.TRAIN)


def test_an_evaluation_takes_only_the_tasks_marked_for_its_split_and_suite() -> None:
    ids = [t.task_id for t in evaluation_tasks(CATALOG, Suite.SANDBOX, Split.TEST, None, 0)]
    assert ids == ["b", "c"]
    assert [t.task_id for t in evaluation_tasks(CATALOG, Suite.ALL, Split.OOD, None, 0)] == ["d"]
    assert [t.task_id for t in evaluation_tasks(CATALOG, Suite.MINIWOB, Split.TEST, None,
                                                0)] == ["m1"]


def test_a_limited_evaluation_draws_the_same_tasks_for_the_same_seed() -> None:
    many = [task(f"t{i:03d}", "test") for i in range(100)]
    first = evaluation_tasks(many, Suite.SANDBOX, Split.TEST, 10, seed=3)
    again = evaluation_tasks(list(reversed(many)), Suite.SANDBOX, Split.TEST, 10, seed=3)
    other = evaluation_tasks(many, Suite.SANDBOX, Split.TEST, 10, seed=4)
    assert first == again and len(first) == 10 and first != other


def test_runs_of_all_suites_are_the_suites_with_tasks_of_the_split() -> None:
    assert evaluation_runs(CATALOG, Suite.ALL, [Split.TEST, Split.OOD]) == [
        (Suite.SANDBOX, Split.TEST), (Suite.SANDBOX, Split.OOD), (Suite.MINIWOB, Split.TEST),
        (Suite.WEB, Split.TEST)]
    assert evaluation_runs(CATALOG, Suite.MINIWOB, [Split.OOD]) == [(Suite.MINIWOB, Split.OOD)]


def test_episode_ids_name_the_run_and_keep_the_task_id() -> None:
    eid = evaluation_episode_id(Split.TEST, 2, Suite.SANDBOX, 0, 7, "gen-price-003")
    assert eid.startswith("test-") and task_id_of(eid) == "gen-price-003"
    assert eid != evaluation_episode_id(Split.TEST, 3, Suite.SANDBOX, 0, 7, "gen-price-003")


def test_a_request_is_outside_every_iteration_on_the_version_asked_for() -> None:
    settings = load_settings()
    req = evaluation_request(settings, "e", task("b", "test", max_steps=10), Split.TEST, 2, 4)
    assert (req.iteration, req.split, req.policy_version, req.max_steps) == (
        EVAL_ITERATION, "test", "v2", 4)
    assert not req.demonstration
    base = evaluation_request(settings, "e", task("b", "test"), Split.TEST, 0, None)
    assert base.policy_version == "base" and base.max_steps == 30  # WebGym's easy test limit


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (0, 0, 0.0, 1.0)])
def test_the_wilson_interval_matches_known_values(k: int, n: int, low: float,
                                                  high: float) -> None:
    got = wilson_interval(k, n)
    assert got == pytest.approx((low, high), abs=1e-4)


def test_the_result_counts_a_crash_and_a_missing_score_as_failures() -> None:
    state = IterationState(EVAL_ITERATION, "test")
    settings = load_settings()
    for eid in ("e1", "e2", "e3", "e4"):
        state.requests[eid] = evaluation_request(settings, eid, task("b", "test"), Split.TEST,
                                                 1, None)
    state.scored["e1"] = scored("e1", split="test", reward=1.0)
    state.scored["e2"] = scored("e2", split="test", reward=0.0)
    state.scored["e3"] = scored("e3", split="test", crashed=True)
    result = evaluation_result(settings, 1, Suite.SANDBOX, Split.TEST, 0, state, 12.0)
    assert (result.episodes, result.successes, result.success_rate) == (4, 1, 0.25)
    assert result.ci_low < 0.25 < result.ci_high
    assert result.episode_ids == ["e1", "e2", "e3", "e4"]
