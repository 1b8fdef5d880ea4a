"""The monitor's folds: episodes from their events in any order, progress, verdicts,
set-of-marks boxes, the episode search, TensorBoard scalars and consumer lag."""

from __future__ import annotations

from aiokafka import TopicPartition

from consumers.monitor.episode_view import Query, Verdict, find, mark_boxes, verdicts
from consumers.monitor.feed import lag_by_topic
from consumers.monitor.state import EpisodeState, View, episode_state, progress
from consumers.monitor.tensorboard import scalars
from tests.factories import sample_event
from tests.unit.scored import scored
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeRequested,
    IterationStarted,
    Mark,
    StepObserved,
)


def requested(eid: str, iteration: int = 3, task_id: str = "shop-001") -> EpisodeRequested:
    e = sample_event("EpisodeRequested")
    assert isinstance(e, EpisodeRequested)
    task = e.task.model_copy(update={"task_id": task_id, "task_name": "Find the price",
                                     "benchmark_name": "webgym-sandbox", "environment": None})
    return e.model_copy(update={"episode_id": eid, "iteration": iteration, "task": task,
                                "policy_version": "v0", "split": "train"})


def observed(eid: str, step: int, **kw: object) -> StepObserved:
    e = sample_event("StepObserved")
    return e.model_copy(update={"episode_id": eid, "step": step, "url": f"http://s/{step}",
                                "title": "T", "screenshot_uri": f"s3://webgym/sha256/{step}.jpg",
                                **kw})


def acted(eid: str, step: int, action: str = "Click [1]", tokens: int = 10) -> ActionChosen:
    e = sample_event("ActionChosen")
    return e.model_copy(update={"episode_id": eid, "step": step, "action_string": action,
                                "policy_version": "v1", "prompt_tokens": tokens,
                                "completion_tokens": 0, "latency_ms": 250.0})


def completed(eid: str, termination: str = "answer") -> EpisodeCompleted:
    e = sample_event("EpisodeCompleted")
    return e.model_copy(update={"episode_id": eid, "termination": termination,
                                "iteration": 3, "task_id": "shop-001"})


def test_an_episode_goes_waiting_running_done_with_its_last_action() -> None:
    v = View()
    change = v.apply(requested("e1"), 1000)
    assert change is not None and change.episode is not None
    assert change.episode["state"] == "waiting" and change.iteration == 3
    v.apply(observed("e1", 0), 1100)
    row = v.episodes["e1"].row()
    assert row["state"] == "running" and row["step"] == 0 and row["version"] == "v0"
    v.apply(acted("e1", 0, "Type [3] [hello]"), 1200)
    v.apply(observed("e1", 1), 1300)
    row = v.episodes["e1"].row()
    assert (row["step"], row["action"], row["version"]) == (1, "Type [3] [hello]", "v1")
    v.apply(completed("e1"), 1400)
    assert v.episodes["e1"].state is EpisodeState.DONE
    v.apply(scored("e1", reward=1.0, blocked=True), 1500)
    assert v.episodes["e1"].state is EpisodeState.BLOCKED and v.episodes["e1"].reward == 1.0


def test_steps_before_the_request_and_events_applied_twice() -> None:
    v = View()
    v.apply(observed("e1", 0), 1000)
    v.apply(observed("e1", 0), 1000)  # a redelivery
    v.apply(requested("e1"), 900)
    e = v.episodes["e1"]
    assert e.task_id == "shop-001" and e.iteration == 3 and list(e.steps) == [0]
    assert len(v.step_times) == 1


def test_a_rescored_history_without_observations_still_has_its_steps() -> None:
    v = View()
    v.apply(scored("e9", actions=("Click [2]", "ANSWER [42]"), reward=1.0), 5)
    steps = v.episodes["e9"].steps
    assert [s.action for s in steps.values()] == ["Click [2]", "ANSWER [42]"]
    assert v.episodes["e9"].iteration == 3


def test_states_from_terminations() -> None:
    assert episode_state(False, None, None) is EpisodeState.WAITING
    assert episode_state(True, None, None) is EpisodeState.RUNNING
    assert episode_state(True, "max_steps", None) is EpisodeState.DONE
    assert episode_state(True, "timeout", None) is EpisodeState.TIMED_OUT
    assert episode_state(True, "cancelled", None) is EpisodeState.CANCELLED
    assert episode_state(True, "answer", scored("x", crashed=True)) is EpisodeState.CRASHED


def test_progress_counts_the_current_iteration() -> None:
    v = View()
    started = sample_event("IterationStarted")
    assert isinstance(started, IterationStarted)
    v.apply(started.model_copy(update={"iteration": 4, "tasks_requested": 5}), 1)
    for i, eid in enumerate(["a", "b", "c"]):
        v.apply(requested(eid, iteration=4), 2)
        if i:
            v.apply(observed(eid, 0), 3)
    v.apply(completed("c", "timeout"), 4)
    v.apply(requested("old", iteration=2), 5)
    assert v.current_iteration == 4
    counts = progress(v.grid(4), 5)
    assert counts["requested"] == 5 and counts["waiting"] == 1
    assert counts["running"] == 1 and counts["timed_out"] == 1


def test_rates_and_model_latency_skip_teacher_actions() -> None:
    v = View()
    for step in range(6):
        v.apply(observed("e", step), 10_000 + step * 1000)
    v.apply(acted("e", 0, tokens=0), 1)  # a teacher: no model call
    v.apply(acted("e", 1), 1)
    r = v.rates(16_000)
    assert r["steps_per_s"] == 6 / 30 and r["latency_ms"] == 250.0


def test_episodes_are_bounded_oldest_first() -> None:
    v = View(max_episodes=10)
    for i in range(15):
        v.apply(requested(f"e{i:02d}"), i)
    assert list(v.episodes)[0] == "e05" and len(v.episodes) == 10


def test_verdicts_per_criterion() -> None:
    text = ("[blocking] NOT BLOCKED\n[criterion B] SUCCESS — the answer names the price\n"
            "[criterion A 1] NOT SUCCESS: no <b>price</b>\nreward 0: failed")
    got = [(v.check, v.verdict, v.detail) for v in verdicts(text, 0.0)]
    assert got == [("blocking", "NOT BLOCKED", ""),
                   ("criterion B", "SUCCESS", "the answer names the price"),
                   ("criterion A 1", "NOT SUCCESS", "no <b>price</b>")]
    rules = "the answer matches the definite answer '$12'\nreward 1"
    assert verdicts(rules, 1.0) == [
        Verdict("judgment", "SUCCESS", "the answer matches the definite answer '$12'")]
    assert verdicts("", 0.0) == []


def test_mark_boxes_are_shares_of_the_viewport_clipped() -> None:
    marks = [Mark(index=1, ref="e1", role="button", name="Go", x=128, y=72, width=64, height=36),
             Mark(index=2, ref="e2", role="link", name="off", x=0, y=900, width=10, height=10),
             Mark(index=3, ref="e3", role="link", name="edge", x=1200, y=0, width=200,
                  height=72)]
    boxes = mark_boxes(marks, (1280, 720))
    assert [(b.index, b.left, b.top, b.width, b.height) for b in boxes] == [
        (1, 10.0, 10.0, 5.0, 5.0), (3, 93.75, 0.0, 6.25, 10.0)]


def test_find_filters_and_parses_a_query_string() -> None:
    v = View()
    v.apply(requested("a", iteration=1, task_id="shop-001"), 1)
    v.apply(requested("b", iteration=2, task_id="wiki-002"), 2)
    v.apply(scored("b", reward=1.0, iteration=2), 3)
    eps = list(v.episodes.values())
    assert [e.episode_id for e in find(eps, Query.parse({"iteration": "2"}))] == ["b"]
    assert [e.episode_id for e in find(eps, Query.parse({"task": "SHOP"}))] == ["a"]
    assert [e.episode_id for e in find(eps, Query.parse({"reward": "1"}))] == ["b"]
    assert [e.episode_id for e in find(eps, Query.parse({"termination": "waiting"}))] == ["a"]
    assert len(find(eps, Query.parse({"iteration": "x", "suite": "sandbox"}))) == 2
    assert find(eps, Query.parse({"version": "v7"})) == []


def test_tensorboard_scalars() -> None:
    m = sample_event("RolloutMetrics").model_copy(update={"iteration": 2, "split": "train",
                                                           "success_rate": 0.5})
    tags = {tag: (value, step) for tag, value, step in scalars(m)}
    # the six rates, episodes, policy_episodes, demonstrations and their success rate
    assert tags["rollout/train/success_rate"] == (0.5, 2) and len(tags) == 10
    policy = tags["rollout/train/episodes"][0] - tags["rollout/train/demonstrations"][0]
    assert tags["rollout/train/policy_episodes"] == (policy, 2)
    p = sample_event("TrainingProgress").model_copy(update={"loss": 1.5, "step": 3,
                                                             "version": 1})
    assert scalars(p) == [("train/v1/loss", 1.5, 3)]
    assert scalars(p.model_copy(update={"loss": None})) == []


def test_lag_by_topic_sums_partitions() -> None:
    tp = TopicPartition
    committed = {tp("t.episodes", 0): 5, tp("t.episodes", 1): 7, tp("t.actions", 0): -1}
    ends = {tp("t.episodes", 0): 9, tp("t.episodes", 1): 7, tp("t.actions", 0): 3}
    assert lag_by_topic(committed, ends, "t") == {"episodes": 4}


def test_the_step_breakdown_pairs_each_action_with_the_observation_after_it() -> None:
    v = View()
    v.apply(observed("e", 0, timings_ms={"screenshot": 30.0}), 1)
    for step, model in ((0, 100.0), (1, 300.0)):
        v.apply(acted("e", step).model_copy(update={"timings_ms": {
            "model": model, "prompt_store": 4.0, "remember": 2.0}}), 1)
        v.apply(observed("e", step + 1, timings_ms={
            "action_wait": model + 20.0, "publish": 4.0, "execute": 50.0, "settle": 110.0,
            "screenshot": 30.0}), 1)
    v.apply(acted("e", 2), 1)  # no observation after it yet: not a whole step
    phases = v.rates(1)["phases"]
    assert phases["model"] == 200.0 and phases["settle"] == 110.0
    assert phases["bus"] == 20.0 - 4.0 - 4.0 - 2.0  # the wait less publish and policy's own
    assert list(phases)[:3] == ["publish", "bus", "model"]  # the order a step runs in
