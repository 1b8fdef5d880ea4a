"""Baseline episodes never feed replay (replay_decisions.py): held out, and without prompts."""

from __future__ import annotations

from processors.replay_buffer.decisions import episode_label, training_steps
from tests.unit.scored import scored
from webgym_common.config import ReplaySettings
from webgym_common.events import EpisodeScored, TrajectoryStep
from webgym_common.versions import BASELINE_VERSION

ALL = ReplaySettings(include_failures=True, success_only=False, filter_same_screenshot=False)


def baseline_episode(split: str, prompts: bool) -> EpisodeScored:
    steps = [TrajectoryStep(step=i, url="http://site/", action_string=a, raw_response=f"r{i}",
                            prompt_uri=f"s3://webgym/p{i}.json" if prompts else None,
                            policy_version=BASELINE_VERSION)
             for i, a in enumerate(("Click [1]", "ANSWER []"))]
    return scored("test-evalbaselinesandboxs0g8-0000-t", split=split, reward=1.0,
                  iteration=-1).model_copy(update={"trajectory": steps,
                                                   "policy_version": BASELINE_VERSION})


def test_a_solved_baseline_evaluation_episode_is_not_kept() -> None:
    for split in ("test", "ood"):
        e = baseline_episode(split, prompts=True)  # even if it had prompts
        assert episode_label(e, ALL) is None and training_steps(e, ALL) == []


def test_a_baseline_step_without_a_prompt_is_never_a_sample_even_in_train() -> None:
    assert training_steps(baseline_episode("train", prompts=False), ALL) == []
    # the same episode with prompts would be kept: the test above fails for the right reason
    assert len(training_steps(baseline_episode("train", prompts=True), ALL)) == 2
