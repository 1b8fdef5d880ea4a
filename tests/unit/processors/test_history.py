"""The task-history fold (history.fold): each episode counted once, levels by successes."""

from __future__ import annotations

from processors.history import LAST_REWARDS, fold
from tests.unit.scored import scored


def test_history_fold_counts_each_episode_once_and_levels_by_successes() -> None:
    h = None
    for i in range(8):
        h = fold(h, scored(f"e{i}", reward=1.0 if i % 2 else 0.0)) or h
    assert (h.attempts, h.successes, h.attempt_level) == (8, 4, 4)
    assert fold(h, scored("e3", reward=1.0)) is None  # a replay changes nothing
    for i in range(8, 20):
        h = fold(h, scored(f"e{i}", reward=1.0))
    assert (h.attempts, h.successes, h.attempt_level) == (20, 16, 5)  # capped at 5
    assert h.last_rewards == [1.0] * LAST_REWARDS
    assert h.recent_episode_ids[-1] == "e19" and h.task_id == "task-1"


def test_a_demonstration_never_raises_the_policys_attempt_level() -> None:
    h = fold(None, scored("e0", reward=1.0))
    demo = scored("d0", reward=1.0).model_copy(update={"policy_version": "demonstration"})
    assert fold(h, demo) is None
    assert fold(None, demo) is None
