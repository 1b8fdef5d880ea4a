"""EpisodeScored events built by hand, for the folds that read webgym.scored."""

from __future__ import annotations

from tests.factories import sample_event
from webgym_common.events import EpisodeScored, TrajectoryStep


def scored(
    episode_id: str,
    *,
    iteration: int = 3,
    split: str = "train",
    crashed: bool = False,
    blocked: bool = False,
    reward: float = 0.0,
    actions: tuple[str, ...] = ("Click [1]", "ANSWER [x]"),
    responses: tuple[str, ...] | None = None,
    task_id: str = "task-1",
) -> EpisodeScored:
    responses = responses if responses is not None else tuple("r" * 10 for _ in actions)
    trajectory = [
        TrajectoryStep(step=i, url="http://site/", action_string=a, raw_response=r)
        for i, (a, r) in enumerate(zip(actions, responses, strict=True))
    ]
    return sample_event("EpisodeScored").model_copy(update={
        "episode_id": episode_id, "task_id": task_id, "iteration": iteration, "split": split,
        "crashed": crashed, "is_blocked": blocked, "reward": reward,
        "steps": len(actions), "trajectory": trajectory, "evaluator_version": "judge-1",
    })
