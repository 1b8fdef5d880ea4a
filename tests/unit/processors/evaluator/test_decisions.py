"""The evaluator's decisions (decisions.py): pure functions over its tables (dicts here)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from processors.evaluator.decisions import (
    STEPS_CAP,
    already_scored,
    blocked_event,
    collect_action,
    collect_observation,
    collect_request,
    completion_error,
    forget_episode,
    lagging,
    missing_parts,
    partial_note,
    scored_event,
    scored_key,
    trajectory_error,
)
from processors.evaluator.reward import Judgement
from tests.factories import sample_event
from tests.unit.processors.evaluator.builders import episode
from webgym_common.agent.actions import parse_action
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeRequested,
    StepObserved,
    Viewport,
)
from webgym_common.history import JUDGE_FAILED

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def completed(steps: int = 2, termination: str = "answer", **update: object) -> EpisodeCompleted:
    return EpisodeCompleted(episode_id="e", task_id="shop-001", iteration=4, split="train",
                            steps=steps, termination=termination, answer="$335.99",
                            started_at=NOW, **update)


def observed(step: int, episode_id: str = "e") -> StepObserved:
    return StepObserved(episode_id=episode_id, task_id="t", step=step, url=f"http://a/{step}",
                        viewport=Viewport(width=1, height=1), accessibility_tree="- heading")


def chosen(step: int, episode_id: str = "e") -> ActionChosen:
    action = parse_action("Click [1]")
    return ActionChosen(episode_id=episode_id, step=step, action=action,
                        action_string="Click [1]", policy_version="v")


def judged(reward: float = 1.0, blocked: bool = False, failed: bool = False) -> Judgement:
    text = "[blocking] BLOCKED: a captcha\nreward 0" if blocked else "ok"
    if failed:
        text = f"{JUDGE_FAILED}: criterion B (unreachable)\n{text}"
    return Judgement(reward, text, blocked, False, True, None, judge_failed=failed)


def test_the_first_record_of_an_unscored_episode_is_collected() -> None:
    req = sample_event("EpisodeRequested")
    assert isinstance(req, EpisodeRequested)
    key, record = collect_request(req, {}, set()) or ("", {})
    assert key == req.episode_id and record["task_id"] == req.task.task_id
    assert collect_request(req, {req.episode_id: {}}, set()) is None  # the first one wins
    assert collect_request(req, {}, {req.episode_id}) is None  # scored: forgotten for good
    assert collect_request(observed(0), {}, set()) is None  # another type: nothing

    key, record = collect_observation(observed(1), {}, set(), 100) or ("", {})
    assert key == "e/1" and record["url"] == "http://a/1" and record["text"] == "- heading"
    assert collect_observation(observed(1), {"e/1": {}}, set(), 100) is None
    assert collect_observation(observed(1), {}, {"e"}, 100) is None
    assert collect_observation(chosen(1), {}, set(), 100) is None

    key, record = collect_action(chosen(2), {}, set()) or ("", {})
    assert key == "e/2" and record["action_string"] == "Click [1]"
    assert collect_action(chosen(2), {"e/2": {}}, set()) is None
    assert collect_action(chosen(2), {}, {"e"}) is None
    assert collect_action(observed(2), {}, set()) is None


def test_only_completions_are_scored_and_each_only_once() -> None:
    assert completion_error(completed()) is None
    assert completion_error(observed(0)) == "expected EpisodeCompleted, got StepObserved"
    assert not already_scored(completed(), {"other"}, set())
    assert already_scored(completed(), {"e"}, set())  # a replay
    assert already_scored(completed(), set(), {"e"})  # a duplicate, being scored right now


def test_missing_parts_names_what_has_not_arrived_yet() -> None:
    done = completed(steps=1)  # answered on step 1: observations 0, 1 and actions 0, 1
    assert missing_parts(done, {}, {}, {}) == [
        "request", "observation 0", "observation 1", "action 0", "action 1"]
    assert missing_parts(done, {"e": {}}, {"e/0": {}, "e/1": {}}, {"e/0": {}}) == ["action 1"]
    assert missing_parts(done, {"e": {}}, {"e/0": {}, "e/1": {}}, {"e/0": {}, "e/1": {}}) == []
    # A step budget ran out: the last observation has no action.
    ran_out = completed(steps=1, termination="max_steps")
    assert missing_parts(ran_out, {"e": {}}, {"e/0": {}, "e/1": {}}, {"e/0": {}}) == []


def test_the_scored_event_carries_the_judgement_and_is_keyed_by_task() -> None:
    ep = episode(steps=2)
    s = scored_event(completed(), ep, judged(), "rules-v1")
    assert (s.episode_id, s.task_id, s.domain) == ("e", "shop-001", "sandbox-shop")
    assert (s.iteration, s.split, s.steps, s.termination) == (4, "train", 2, "answer")
    assert (s.reward, s.submit, s.is_blocked, s.crashed) == (1.0, True, False, False)
    assert (s.evaluator_version, s.policy_version, s.answer) == ("rules-v1", "unknown",
                                                                 "$335.99")
    assert [t.step for t in s.trajectory] == [0, 1, 2]
    assert scored_key(s) == "shop-001"  # all episodes of a task: one partition, in order
    unknown = scored_event(completed(), replace(ep, task=replace(ep.task, domain="")),
                           judged(), "v")
    assert unknown.domain == "unknown"


def test_a_blocked_domain_is_blocklisted_for_the_configured_time() -> None:
    ep = episode(steps=1)
    assert blocked_event(completed(), ep, judged(), timedelta(hours=12), NOW) is None
    entry = blocked_event(completed(), ep, judged(0.0, blocked=True), timedelta(hours=12), NOW)
    assert entry is not None
    assert (entry.domain, entry.episode_id) == ("sandbox-shop", "e")
    assert entry.blocked_until == NOW + timedelta(hours=12)
    assert entry.reason == "[blocking] BLOCKED: a captcha"  # the evaluation's first line
    said = blocked_event(completed(), replace(ep, reason="captcha wall"),
                         judged(0.0, blocked=True), timedelta(hours=1), NOW)
    assert said is not None and said.reason == "captcha wall"  # the browser's reason first
    nameless = replace(ep, task=replace(ep.task, domain=""))
    assert blocked_event(completed(), nameless, judged(0.0, True), timedelta(hours=1), NOW) is None


def test_scoring_forgets_the_episodes_state_but_not_other_episodes() -> None:
    requests = {"e": {}, "f": {}}
    obs = {"e/0": {}, "e/1": {}, "e/2": {}, "f/0": {}}
    # Steps 0 .. ANSWER step + 1, and on while there are more (steps_in): not e/5.
    acts = {"e/0": {}, "e/1": {}, "e/3": {}, "e/5": {}, "f/0": {}}
    doomed = forget_episode(completed(steps=1), requests, obs, acts)
    by_table = {name: sorted(k for t, k in doomed if t is table)
                for name, table in (("requests", requests), ("obs", obs), ("acts", acts))}
    assert by_table == {"requests": ["e"], "obs": ["e/0", "e/1", "e/2"],
                        "acts": ["e/0", "e/1", "e/3"]}
    assert forget_episode(completed(steps=1), {}, {}, {}) == []


def test_absurd_step_counts_are_refused_before_anything_iterates_over_them() -> None:
    assert completion_error(completed(steps=0)) is None
    assert completion_error(completed(steps=STEPS_CAP)) is None
    assert completion_error(completed(steps=-1)) == (
        "absurd EpisodeCompleted: steps=-1 is negative")
    huge = completion_error(completed(steps=10**9))
    assert huge is not None and "steps=1000000000 exceeds the cap" in huge


def test_a_completion_needs_its_request_and_stays_within_its_step_budget() -> None:
    request = {"task_id": "shop-001", "max_steps": 10}
    assert trajectory_error(completed(steps=10), request) is None
    assert trajectory_error(completed(steps=11), request) == (
        "absurd EpisodeCompleted: steps=11 exceeds the episode's max_steps=10")
    unknown = trajectory_error(completed(), None)
    assert unknown is not None and unknown.startswith("unknown episode 'e'")


def test_a_state_partition_lags_until_its_agent_has_handled_it_to_the_target() -> None:
    targets = {"obs": 120, "acts": 80, "episodes": 7}
    assert lagging(targets, {}) == ["obs", "acts", "episodes"]  # nothing handled yet
    assert lagging(targets, {"obs": 119, "acts": 80, "episodes": 9}) == ["obs"]
    assert lagging(targets, {"obs": 120, "acts": 80, "episodes": 7}) == []
    assert lagging({"obs": 0}, {}) == []  # an empty partition: nothing to wait for


def test_a_partial_trajectory_says_so_first_and_a_judge_failure_stays_first() -> None:
    note = partial_note(["action 1", "observation 2"], "the state topics were read past it")
    assert note == ("partial trajectory: action 1, observation 2 never arrived (the state "
                    "topics were read past it); judged with what is there")
    many = partial_note([f"action {i}" for i in range(15)], "why")
    assert "action 9 and 5 more never arrived" in many
    s = scored_event(completed(), episode(steps=2), judged(), "v", note)
    assert s.evaluation == f"{note}\nok"
    failed = scored_event(completed(), episode(steps=2), judged(0.0, failed=True), "v", note)
    assert failed.evaluation.startswith(f"{JUDGE_FAILED}: ") and note in failed.evaluation
    assert scored_event(completed(), episode(steps=2), judged(), "v").evaluation == "ok"


def test_a_judge_failure_blocklists_nothing() -> None:
    j = replace(judged(0.0, blocked=True), judge_failed=True)
    assert blocked_event(completed(), episode(steps=1), j, timedelta(hours=1), NOW) is None
