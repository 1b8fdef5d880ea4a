"""What an evaluation decides (evaluate.py): its tasks, ids, keys, requests and result."""

from __future__ import annotations

from datetime import timedelta

import pytest

from producers.controller.evaluate import (
    BASELINE_EVAL_VERSION,
    EVAL_ITERATION,
    evaluation_episode_id,
    evaluation_key,
    evaluation_request,
    evaluation_result,
    evaluation_runs,
    evaluation_tasks,
    result_rows,
    selection_tag,
    version_cell,
    version_label,
)
from producers.controller.iteration import IterationState, task_id_of
from tests.unit.scored import scored
from webgym_common.choices import Split, Suite
from webgym_common.config import load_settings
from webgym_common.eventbase import utc_now
from webgym_common.events import PageEnvironment, Task
from webgym_common.tasks import group_of, in_split, suite_of
from webgym_common.versions import CONTROL_EVAL_OFFSET, version_number


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


def test_a_task_without_a_split_is_in_no_split_never_train() -> None:
    legacy = CATALOG[4]
    assert not any(in_split(legacy, s) for s in Split)
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


def test_a_held_out_episode_gets_the_evaluation_deadline_not_the_training_one() -> None:
    settings = load_settings()
    settings = settings.model_copy(update={"rollout": settings.rollout.model_copy(
        update={"task_timeout_minutes": 5.0, "eval_timeout_minutes": 30.0})})
    before = utc_now()
    req = evaluation_request(settings, "e", task("b", "test"), Split.TEST, 1, 8)
    assert timedelta(minutes=29) < req.deadline - before <= timedelta(minutes=30, seconds=5)


def test_the_wilson_interval_is_still_importable_from_evaluate() -> None:
    from producers.controller import evaluate, stats

    assert evaluate.wilson_interval is stats.wilson_interval  # moved, re-exported


def test_a_per_group_evaluation_takes_the_stratified_set_and_not_with_a_limit() -> None:
    many = [task(f"t{i:03d}", "test", max_steps=5).model_copy(
        update={"subdomain": f"g{i % 4}"}) for i in range(40)]
    chosen = evaluation_tasks(many, Suite.SANDBOX, Split.TEST, None, 0, per_group=3)
    assert len(chosen) == 12 and {group_of(t) for t in chosen} == {"g0", "g1", "g2", "g3"}
    with pytest.raises(ValueError, match="not both"):
        evaluation_tasks(many, Suite.SANDBOX, Split.TEST, 10, 0, per_group=3)


def test_keys_and_ids_tell_selections_and_the_baseline_apart() -> None:
    assert selection_tag(0) == "s0" and selection_tag(2, 5) == "s2g5"
    # a full split or a draw keeps the key it always had: old runs still resume
    assert evaluation_key("m", 3, Suite.SANDBOX, Split.TEST, 0) == "m:v3:sandbox:test:s0"
    keys = {evaluation_key("m", v, Suite.SANDBOX, Split.TEST, 0, g)
            for v in (0, BASELINE_EVAL_VERSION) for g in (None, 5, 8)}
    assert len(keys) == 6
    assert "m:baseline:sandbox:test:s0g8" in keys
    ids = {evaluation_episode_id(Split.TEST, v, Suite.MINIWOB, 0, 1, "miniwob-x-1", g)
           for v in (0, 1, BASELINE_EVAL_VERSION) for g in (None, 5)}
    assert len(ids) == 6
    for eid in ids:  # the run is one "-"-free word even for the baseline (not "eval-1")
        assert eid.split("-", 3)[2] == "0001" and task_id_of(eid) == "miniwob-x-1"
    assert evaluation_episode_id(Split.TEST, BASELINE_EVAL_VERSION, Suite.MINIWOB, 0, 1, "t",
                                 5) == "test-evalbaselineminiwobs0g5-0001-t"


def test_the_baseline_is_requested_on_its_tag_which_names_no_model() -> None:
    req = evaluation_request(load_settings(), "e", task("b", "test"), Split.TEST,
                             BASELINE_EVAL_VERSION, None)
    assert req.policy_version == "baseline" and req.iteration == EVAL_ITERATION
    assert version_number(req.policy_version) is None  # no model server is asked for it


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


def test_the_baseline_result_has_version_minus_one_and_is_printed_as_the_baseline() -> None:
    state = IterationState(EVAL_ITERATION, "test")
    settings = load_settings()
    state.requests["e1"] = evaluation_request(settings, "e1", task("b", "test"), Split.TEST,
                                              BASELINE_EVAL_VERSION, None)
    state.scored["e1"] = scored("e1", split="test", reward=1.0)
    result = evaluation_result(settings, BASELINE_EVAL_VERSION, Suite.SANDBOX, Split.TEST, 0,
                               state, 1.0)
    assert result.version == -1
    assert result_rows([result])[0][:4] == ("baseline", "sandbox", "test", "1/1")


def test_the_control_is_evaluated_on_its_own_tag_ids_and_label() -> None:
    control = CONTROL_EVAL_OFFSET + 1
    request = evaluation_request(load_settings(), "e1", task("b", "test"), Split.TEST, control,
                                 None)
    assert request.policy_version == "control-v1"
    assert (version_label(control), version_cell(control)) == ("control-v1", "control1")
    eid = evaluation_episode_id(Split.TEST, control, Suite.MINIWOB, 0, 3, "m-1", 5)
    assert eid == "test-evalcontrol1miniwobs0g5-0003-m-1"
    assert eid != evaluation_episode_id(Split.TEST, 1, Suite.MINIWOB, 0, 3, "m-1", 5)
    assert evaluation_key("p", control, Suite.MINIWOB, Split.TEST, 0, 5) == (
        "p:control-v1:miniwob:test:s0g5")
