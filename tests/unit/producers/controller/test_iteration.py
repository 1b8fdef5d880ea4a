"""The rollout controller's decisions: which iteration, which requests, when to cancel, close."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from producers.controller.iteration import (
    IterationState,
    Pending,
    active_blocks,
    all_accounted,
    closing_event,
    demonstration_id,
    demonstration_tasks,
    episode_id,
    first_training_iteration,
    grace_begins,
    grace_over,
    is_demonstration,
    is_warm_start_iteration,
    iteration_to_run,
    latest_policy_version,
    make_request,
    missing_requests,
    overdue,
    releasable,
    scores_in,
    served_version,
    solved_summary,
    started_event,
    task_id_of,
    track,
    unfinished,
    version_needed,
)
from tests.factories import sample_event
from webgym_common.config import RolloutSettings, load_settings
from webgym_common.events import (
    DomainBlocked,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    IterationClosed,
    IterationStarted,
    ModelServed,
    ReferenceAction,
    Task,
    utc_now,
)


def started(iteration: int, split: str = "train") -> IterationStarted:
    e = sample_event("IterationStarted").model_copy(update={"iteration": iteration,
                                                            "split": split})
    assert isinstance(e, IterationStarted)
    return e


def closed(iteration: int, split: str = "train") -> IterationClosed:
    e = sample_event("IterationClosed").model_copy(update={"iteration": iteration,
                                                           "split": split})
    assert isinstance(e, IterationClosed)
    return e


def request(eid: str, deadline_in_s: float = 600) -> EpisodeRequested:
    e = sample_event("EpisodeRequested").model_copy(update={
        "episode_id": eid, "deadline": utc_now() + timedelta(seconds=deadline_in_s)})
    assert isinstance(e, EpisodeRequested)
    return e


def completed(eid: str, termination: str = "answer") -> EpisodeCompleted:
    e = sample_event("EpisodeCompleted").model_copy(update={"episode_id": eid,
                                                            "termination": termination})
    assert isinstance(e, EpisodeCompleted)
    return e


def scored(eid: str) -> EpisodeScored:
    e = sample_event("EpisodeScored").model_copy(update={"episode_id": eid})
    assert isinstance(e, EpisodeScored)
    return e


def state_with(*eids: str, started_at: float = 0.0) -> IterationState:
    return IterationState(3, "train", requests={e: request(e) for e in eids}, started=started_at)


def test_episode_ids_carry_the_task_id_even_with_dashes() -> None:
    eid = episode_id("train", 7, 12, "shop-search-03")
    assert eid == "train-it7-0012-shop-search-03"
    assert task_id_of(eid) == "shop-search-03"


def test_the_unclosed_iteration_of_the_split_is_resumed() -> None:
    control = [started(0), closed(0), started(1), started(2, "test")]
    assert iteration_to_run(control, "train") == 1
    assert iteration_to_run(control, "test") == 2


def test_a_new_iteration_is_one_past_the_last_started_of_any_split() -> None:
    assert iteration_to_run([], "train") == 0
    control = [started(0), closed(0), started(4, "test"), closed(4, "test")]
    assert iteration_to_run(control, "train") == 5


def test_a_close_of_another_split_does_not_close_this_one() -> None:
    assert iteration_to_run([started(2), closed(2, "test")], "train") == 2


def test_started_event_matches_iteration_and_split() -> None:
    control = [started(1, "test"), started(1)]
    assert started_event(control, 1, "train") is control[1]
    assert started_event(control, 2, "train") is None


def test_only_domains_blocked_until_later_are_active() -> None:
    now = utc_now()
    blocked = sample_event("DomainBlocked")
    assert isinstance(blocked, DomainBlocked)
    table = {
        "a.org": blocked.model_copy(update={"blocked_until": now + timedelta(hours=1)}),
        "b.org": blocked.model_copy(update={"blocked_until": now - timedelta(seconds=1)}),
        "c.org": sample_event("Task"),  # not a block
    }
    assert active_blocks(table, now) == {"a.org"}


def test_the_newest_served_version_names_the_policy_version() -> None:
    served = sample_event("ModelServed")
    assert isinstance(served, ModelServed)
    v1 = served.model_copy(update={"model_name": "m", "version": 1, "produced_at": utc_now()})
    # Served later but older: the version number decides, not the time.
    v2 = served.model_copy(update={"model_name": "m", "version": 2,
                                   "produced_at": utc_now() - timedelta(hours=1)})
    other = served.model_copy(update={"model_name": "other", "version": 9})
    assert served_version([v1, v2, other], "m") == 2
    assert latest_policy_version([v1, v2, other], "m", "base") == "v2"
    assert latest_policy_version([other], "m", "base") == "base"
    assert latest_policy_version([], "m", "base") == "base"


@pytest.mark.parametrize(("iteration", "k", "needed"), [
    (0, 0, 0), (1, 0, 1), (5, 0, 5),  # synchronous: the version trained on everything before
    (0, 1, 0), (1, 1, 0), (2, 1, 1), (5, 2, 3),  # asynchronous: up to k versions behind
])
def test_an_iteration_waits_for_the_version_its_staleness_allows(
        iteration: int, k: int, needed: int) -> None:
    assert version_needed(iteration, k) == needed


@pytest.mark.parametrize(("iteration", "train", "first", "warm"), [
    (0, True, True, True),  # the warm start's own iteration: its close trains v1 on the bank
    (1, True, True, False), (2, True, True, False),
    (0, True, False, False),  # v1 learns the bank and iteration 0's successes
    (0, False, True, False),  # no training loop: no warm start to wait for
])
def test_only_a_warm_start_first_empties_iteration_0(
        iteration: int, train: bool, first: bool, warm: bool) -> None:
    assert is_warm_start_iteration(iteration, train, first) is warm


def test_demonstrations_are_a_stable_share_of_training_episodes_with_references() -> None:
    task = sample_event("Task")
    assert isinstance(task, Task)
    ref = ReferenceAction(action="ANSWER", text="42")
    with_refs = task.model_copy(update={"reference_actions": [ref]})
    ids = [episode_id("train", 3, i, "t") for i in range(2000)]
    chosen = [eid for eid in ids if is_demonstration(eid, with_refs, "train", 0.25)]
    assert 400 < len(chosen) < 600  # about a quarter
    assert chosen == [eid for eid in ids if is_demonstration(eid, with_refs, "train", 0.25)]
    assert not any(is_demonstration(eid, with_refs, "train", 0.0) for eid in ids)
    assert not any(is_demonstration(eid, with_refs, "test", 1.0) for eid in ids)
    assert not any(is_demonstration(eid, task.model_copy(update={"reference_actions": []}),
                                    "train", 1.0) for eid in ids)
    settings = load_settings(rollout={"demonstration_share": 1.0})
    req = make_request(settings, ids[0], with_refs, 3, "train", "v2")
    assert (req.demonstration, req.policy_version) == (True, "demonstration")
    req = make_request(load_settings(), ids[0], with_refs, 3, "train", "v2")
    assert (req.demonstration, req.policy_version) == (False, "v2")


def test_missing_requests_skip_requested_ones_and_vanished_tasks() -> None:
    task = sample_event("Task")
    assert isinstance(task, Task)
    ids = [episode_id("train", 1, i, t) for i, t in enumerate(["a", "b", "gone"])]
    requested = {ids[0]: request(ids[0])}
    assert missing_requests(ids, requested, {"a": task, "b": task}) == [ids[1]]


def test_track_counts_only_this_iterations_episodes_and_the_first_record() -> None:
    state = state_with("e1")
    first = completed("e1", "answer")
    track(state, first)
    track(state, completed("e1", "crashed"))
    track(state, completed("stranger"))
    track(state, scored("e1"))
    track(state, sample_event("Task"))
    assert state.completed == {"e1": first}
    assert list(state.scored) == ["e1"]


def test_overdue_is_past_the_deadline_by_more_than_the_slack() -> None:
    state = state_with("ok", "late", "done", "asked")
    now = utc_now()
    for eid in ("late", "done", "asked"):
        state.requests[eid] = request(eid, deadline_in_s=-100)
    state.completed["done"] = completed("done")
    state.cancelled["asked"] = 1.0
    assert overdue(state, now, slack_s=30) == ["late"]
    assert overdue(state, now, slack_s=300) == []
    assert unfinished(state) == ["ok", "late"]


def test_the_grace_period_starts_at_the_threshold_once() -> None:
    state = state_with("a", "b", "c", "d")
    state.completed = {e: completed(e) for e in ("a", "b")}
    assert not grace_begins(state, 0.8)
    state.completed["c"] = completed("c")
    assert grace_begins(state, 0.75)
    state.grace_started = 100.0
    assert not grace_begins(state, 0.75)
    assert not grace_over(state, 129.0, 30)
    assert grace_over(state, 130.0, 30)
    assert not grace_over(state_with("a"), 1e9, 30)


def test_an_iteration_is_accounted_for_when_cancels_have_had_their_wait() -> None:
    state = state_with("a", "b")
    state.completed["a"] = completed("a")
    state.cancelled["b"] = 100.0
    assert not all_accounted(state, 105.0, cancel_wait_s=10)
    assert all_accounted(state, 111.0, cancel_wait_s=10)
    state.completed["b"] = completed("b", "cancelled")  # it did report: counted once
    assert all_accounted(state, 100.0, cancel_wait_s=10)


def test_scores_are_waited_for_until_score_wait() -> None:
    state = state_with("a")
    state.completed["a"] = completed("a")
    assert not scores_in(state, 105.0, accounted_at=100.0, score_wait_s=10)
    assert scores_in(state, 111.0, accounted_at=100.0, score_wait_s=10)
    state.scored["a"] = scored("a")
    assert scores_in(state, 100.0, accounted_at=100.0, score_wait_s=10)


def test_the_close_counts_cancels_that_never_reported() -> None:
    state = state_with("a", "b", "c", "d", "e", started_at=10.0)
    state.completed = {"a": completed("a", "crashed"), "b": completed("b", "blocked"),
                       "c": completed("c", "cancelled"), "d": completed("d", "timeout")}
    state.cancelled = {"c": 1.0, "e": 2.0}
    close = closing_event(state, now=25.0)
    assert (close.requested, close.completed, close.crashed, close.blocked, close.cancelled,
            close.timed_out, close.wall_time_s) == (5, 4, 1, 1, 2, 1, 15.0)


def test_seeded_demonstrations_are_teacher_forced_training_tasks_with_references() -> None:
    def ref(i: int) -> list[ReferenceAction]:  # t1's solution is held-out t7's too
        return [ReferenceAction(action="ANSWER", text="x" if i in (1, 7) else f"x{i}")]

    tasks = [Task(task_id=f"t{i}", task_name="n", domain="d", website="w", difficulty=1,
                  reference_actions=ref(i) if i % 2 else [], split="train" if i < 6 else "test")
             for i in range(8)]
    chosen = demonstration_tasks(tasks, 5, random.Random(1))
    assert len(chosen) == 5 and {t.task_id for t in chosen} == {"t3", "t5"}
    eid = demonstration_id("train", 0, 2, "t3")
    assert task_id_of(eid) == "t3"
    assert is_demonstration(eid, tasks[3], "train", share=0.0)
    assert not is_demonstration(episode_id("train", 0, 2, "t3"), tasks[3], "train", share=0.0)
    assert first_training_iteration([started(0, "test")], 1)
    assert not first_training_iteration([started(0)], 1)


def test_a_rollout_pool_task_is_never_teacher_forced() -> None:
    ref = [ReferenceAction(action="ANSWER", text="x")]
    fresh = Task(task_id="f", task_name="n", domain="d", website="w", difficulty=1,
                 reference_actions=ref, split="train", extra_json='{"pool": "rollout"}')
    assert not is_demonstration("train-it0-d000-f", fresh, "train", 1.0)
    assert not demonstration_tasks([fresh], 3, random.Random(0))
    banked = fresh.model_copy(update={"extra_json": None})
    assert is_demonstration("train-it0-d000-f", banked, "train", 1.0)


def test_a_tasks_own_step_limit_wins_over_the_band_limit() -> None:
    settings = load_settings()
    base = Task(task_id="t", task_name="n", domain="d", website="w", difficulty=8)
    assert make_request(settings, "train-it0-0000-t", base, 0, "train", "base").max_steps == 30
    own = base.model_copy(update={"max_steps": 5})
    assert make_request(settings, "train-it0-0000-t", own, 0, "train", "base").max_steps == 5


def test_a_step_cap_ends_policy_episodes_sooner_but_never_a_demonstration() -> None:
    settings = load_settings().model_copy(update={"rollout": RolloutSettings(train_max_steps=8)})
    base = Task(task_id="t", task_name="n", domain="d", website="w", difficulty=8)
    assert make_request(settings, "train-it0-0000-t", base, 0, "train", "v1").max_steps == 8
    own = base.model_copy(update={"max_steps": 5})
    assert make_request(settings, "train-it0-0000-t", own, 0, "train", "v1").max_steps == 5
    refs = base.model_copy(update={"reference_actions": [ReferenceAction(action="CLICK")] * 9})
    demo = make_request(settings, demonstration_id("train", 0, 0, "t"), refs, 0, "train", "v1")
    assert demo.demonstration and demo.max_steps == 30


def test_the_close_line_counts_the_policys_successes_and_the_demonstrations_apart() -> None:
    state = state_with()
    for i in range(4):
        own = request(f"p{i}").model_copy(update={"demonstration": False, "policy_version": "v1"})
        demo = own.model_copy(update={"episode_id": f"d{i}", "demonstration": True,
                                      "policy_version": "demonstration"})
        state.requests |= {own.episode_id: own, demo.episode_id: demo}
    for eid in ("d0", "d1", "d2", "d3", "p0"):
        state.scored[eid] = scored(eid).model_copy(update={"reward": 1.0, "evaluation": "ok"})
    state.scored["p1"] = scored("p1").model_copy(update={"reward": 0.0})
    assert solved_summary(state) == "policy 1/4 solved, demonstrations 4/4 (not counted)"
    del state.requests["d0"], state.requests["d1"], state.requests["d2"], state.requests["d3"]
    assert solved_summary(state) == "policy 1/4 solved"  # no demonstrations: none mentioned


def test_pending_episodes_are_released_a_window_at_a_time_and_hold_the_close() -> None:
    state = state_with("e0", "e1")
    state.pending = {f"p{i}": Pending(request(f"p{i}"), timedelta(minutes=5)) for i in range(5)}
    assert releasable(state, 4) == ["p0", "p1"]  # two in flight already
    state.completed = {e: completed(e) for e in ("e0", "e1")}
    assert releasable(state, 4) == ["p0", "p1", "p2", "p3"]
    assert not all_accounted(state, now=0.0, cancel_wait_s=0)  # pending: not closable
    assert not grace_begins(state, 0.5)  # 2 of 7 done: the pending count too
    state.pending.clear()
    assert all_accounted(state, now=0.0, cancel_wait_s=0)
