"""The rollout controller's decisions: which iteration, which requests, when to cancel, close."""

from __future__ import annotations

from datetime import timedelta

from producers.controller.iteration import (
    IterationState,
    active_blocks,
    all_accounted,
    closing_event,
    episode_id,
    grace_begins,
    grace_over,
    iteration_to_run,
    latest_policy_version,
    missing_requests,
    overdue,
    scores_in,
    started_event,
    task_id_of,
    track,
    unfinished,
)
from tests.factories import sample_event
from webgym_common.events import (
    DomainBlocked,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    IterationClosed,
    IterationStarted,
    ModelVersion,
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


def test_the_newest_model_names_the_policy_version() -> None:
    model = sample_event("ModelVersion")
    assert isinstance(model, ModelVersion)
    old = model.model_copy(update={"model_name": "m", "version": 1,
                                   "produced_at": utc_now() - timedelta(hours=1)})
    new = model.model_copy(update={"model_name": "m", "version": 2, "produced_at": utc_now()})
    assert latest_policy_version([new, old], "default") == "m:v2"
    assert latest_policy_version([], "default") == "default"


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
