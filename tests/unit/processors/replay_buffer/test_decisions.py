"""Which steps of a scored episode become training samples, and the samples made of them."""

from __future__ import annotations

from processors.replay_buffer.decisions import (
    KeptStep,
    replay_sample,
    sample_id,
    training_steps,
)
from tests.unit.scored import scored
from webgym_common.config import ReplaySettings
from webgym_common.events import ChatMessage, EpisodeScored, TrajectoryStep
from webgym_common.history import JUDGE_FAILED

DEFAULT = ReplaySettings()
SHOT = "s3://webgym/sha256/aa/shot.jpg"


def step(i: int, sha: str | None, **update: object) -> TrajectoryStep:
    fields: dict[str, object] = {
        "step": i, "url": "http://site/", "screenshot_uri": f"s3://webgym/shot{i}.jpg",
        "screenshot_sha256": sha, "action_string": "Click [1]", "raw_response": f"reply {i}",
        "prompt_uri": f"s3://webgym/prompt{i}.json", "policy_version": "base"}
    return TrajectoryStep.model_validate({**fields, **update})


def episode(steps: list[TrajectoryStep], reward: float = 1.0, **update: object) -> EpisodeScored:
    return scored("ep", reward=reward).model_copy(
        update={"trajectory": steps, "policy_version": "episode-v", **update})


def kept_steps(e: EpisodeScored, cfg: ReplaySettings = DEFAULT) -> list[tuple[int, bool]]:
    return [(k.step, k.success) for k in training_steps(e, cfg)]


def test_a_success_keeps_every_step_whose_next_screenshot_differs_and_the_last() -> None:
    # 0 -> 1 changed the page, 1 -> 2 did not (dropped), 2 -> 3 did; 3 is the ANSWER: kept
    e = episode([step(0, "a"), step(1, "b"), step(2, "b"), step(3, "c")])
    assert kept_steps(e) == [(0, True), (2, True), (3, True)]
    # without the filter every step is kept
    assert kept_steps(e, ReplaySettings(filter_same_screenshot=False)) == [
        (0, True), (1, True), (2, True), (3, True)]


def test_the_trajectory_is_read_in_step_order_and_gaps_or_unknown_hashes_never_drop() -> None:
    # out of order on the wire; step 4 is missing so 3's next screenshot is unknown
    e = episode([step(1, "x"), step(0, "x"), step(3, "y"), step(5, "y"), step(6, None),
                 step(7, None)])
    assert kept_steps(e) == [(1, True), (3, True), (5, True), (6, True), (7, True)]


def test_steps_without_a_prompt_a_reply_or_a_valid_action_are_never_kept() -> None:
    e = episode([step(0, "a", prompt_uri=None), step(1, "b", raw_response="  "),
                 step(2, "c", action_valid=False), step(3, "d")])
    assert kept_steps(e) == [(3, True)]
    # an observation the episode ended on, without an action, only serves as "next"
    e = episode([step(0, "a"), step(1, "a", raw_response="", prompt_uri=None)])
    assert kept_steps(e) == []


def test_a_failure_is_kept_only_with_include_failures_and_then_labelled() -> None:
    e = episode([step(0, "a"), step(1, "b")], reward=0.0)
    assert kept_steps(e) == []
    assert kept_steps(e, ReplaySettings(include_failures=True)) == [(0, False), (1, False)]
    assert kept_steps(e, ReplaySettings(success_only=False)) == [(0, False), (1, False)]
    # a blocked site is no failure of the agent's
    blocked = e.model_copy(update={"is_blocked": True})
    assert kept_steps(blocked, ReplaySettings(include_failures=True)) == []


def test_crashed_unjudged_and_test_split_episodes_give_nothing_even_with_reward_1() -> None:
    steps = [step(0, "a"), step(1, "b")]
    cfg = ReplaySettings(include_failures=True, success_only=False)
    assert kept_steps(episode(steps), cfg) == [(0, True), (1, True)]
    assert kept_steps(episode(steps, crashed=True), cfg) == []
    assert kept_steps(episode(steps, evaluation=f"{JUDGE_FAILED}: no verdict"), cfg) == []
    assert kept_steps(episode(steps, split="test"), cfg) == []


def test_the_policy_version_is_the_steps_else_the_episodes() -> None:
    e = episode([step(0, "a", policy_version="webgym-policy:v3"),
                 step(1, "b", policy_version=None)])
    assert [k.policy_version for k in training_steps(e, DEFAULT)] == [
        "webgym-policy:v3", "episode-v"]


def test_sample_ids_are_episode_and_step() -> None:
    assert sample_id("ep-9", 4) == "ep-9:4"


def test_a_sample_carries_the_episode_and_the_step() -> None:
    e = episode([step(0, "a")], reward=1.0, iteration=7, task_id="t-3")
    kept = KeptStep(0, "s3://webgym/p.json", "Thought: t\nAction: ANSWER [4]", SHOT, "v2", True)
    msgs = [ChatMessage(role="user", content="hi")]
    s = replay_sample(e, kept, msgs)
    assert (s.sample_id, s.episode_id, s.task_id, s.step, s.messages, s.response, s.reward,
            s.iteration, s.policy_version, s.success, s.split) == (
        "ep:0", "ep", "t-3", 0, msgs, "Thought: t\nAction: ANSWER [4]", 1.0, 7, "v2", True,
        "train")
    assert (s.prompt_uri, s.screenshot_uri) == (None, None)  # inline


def test_a_sample_by_reference_names_its_prompt_and_screenshot_instead_of_messages() -> None:
    e = episode([step(0, "a")], reward=1.0, iteration=7, task_id="t-3")
    kept = KeptStep(0, "s3://webgym/sha256/pp/p.json", "Action: ANSWER [4]", SHOT, "v2", True)
    s = replay_sample(e, kept, [], by_reference=True)
    assert (s.sample_id, s.messages, s.prompt_uri, s.screenshot_uri, s.response) == (
        "ep:0", [], "s3://webgym/sha256/pp/p.json", SHOT, "Action: ANSWER [4]")
