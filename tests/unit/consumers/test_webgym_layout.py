"""WebGym's trajectory layout: every field WebGym's own writer saves, mapped from our events."""

from __future__ import annotations

from pathlib import Path

from consumers.webgym_layout import same_as_next, webgym_path, webgym_task, webgym_trajectory
from tests.unit.processors.reprocess.test_rescore import episode_events, log_of
from tests.unit.scored import scored
from webgym_common.events import EpisodeRequested, StepObserved


def test_a_step_carries_webgyms_fields() -> None:
    log = log_of(episode_events("e1", "42", steps=2))
    log.scores["e1"] = scored("e1", reward=1.0).model_copy(update={
        "evaluation": "ok\nreward 1", "submission_judgment": "[criterion B] SUCCESS"})
    steps = webgym_trajectory(log, "e1", keypoints=lambda obs: [1, 2],
                              images={0: "images/e1/0.png"}, prompts={1: '[{"role": "user"}]'})
    assert len(steps) == 3
    first, last = steps[0], steps[-1]
    assert set(first) == {"observation", "action", "response", "reward",
                          "same_as_next_screenshot", "trajectory_metadata"}
    obs = first["observation"]
    assert set(obs) == {"task", "image_path", "ac_tree", "page_metadata"}
    assert obs["image_path"] == "images/e1/0.png" and obs["ac_tree"].startswith("- text")
    assert obs["page_metadata"] == {"url": "http://s/0", "title": "page 0",
                                    "viewport": {"width": 800, "height": 600}}
    assert obs["task"]["reference_answer"] == "42" and obs["task"]["max_steps"] == 10
    assert obs["task"]["evaluator_reference"] == [
        {"description": "[Group 1: the number] 42", "difficulty": 1}]
    assert first["action"] == {"action": first["action"]["action"], "action_string": "Click [1]"}
    assert first["action"]["action"]["kind"] == "Click"
    assert set(first["response"]) == {"raw_response", "answering_tokens", "raw_prompt"}
    assert steps[1]["response"]["raw_prompt"] == '[{"role": "user"}]'
    assert steps[1]["observation"]["image_path"] == ""  # no screenshot, no copy
    assert first["reward"] == {"reward": 0.0, "evaluation": None, "is_blocked": False,
                               "submit": False, "submission_judgment": None}
    assert last["reward"] == {"reward": 1.0, "evaluation": "ok\nreward 1", "is_blocked": False,
                              "submit": True, "submission_judgment": "[criterion B] SUCCESS"}
    assert last["action"]["action_string"] == "ANSWER [42]"
    assert first["trajectory_metadata"]["keypoint_step_ids"] == [1, 2]


def test_same_as_next_screenshot_and_the_file_names() -> None:
    obs = [e for e in episode_events("e1", "42") if isinstance(e, StepObserved)]
    assert not same_as_next(obs[0], obs[1]) and not same_as_next(obs[2], None)
    twin = obs[1].model_copy(update={"screenshot_sha256": obs[0].screenshot_sha256})
    assert same_as_next(obs[0], twin)
    assert webgym_path(Path("/o"), "train", 5) == Path(
        "/o/train_trajectories/train_trajectories.iteration5.json")
    assert webgym_path(Path("/o"), "test", 5, 0).name == "test_trajectories.iteration5_rank_0.json"
    request = next(e for e in episode_events("e1", "42") if isinstance(e, EpisodeRequested))
    assert webgym_task(request.task, None)["website"] == "http://s/"
