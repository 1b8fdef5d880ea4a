"""What a task history means: success is a full reward, the level is capped successes,
a judge failure is no attempt."""

from __future__ import annotations

from tests.unit.scored import scored
from webgym_common.history import JUDGE_FAILED, MAX_LEVEL, attempt_level, is_judged, is_success


def test_only_a_full_reward_is_a_success() -> None:
    assert is_success(1.0)
    assert not is_success(0.0)
    assert not is_success(0.99)


def test_the_attempt_level_is_the_successes_capped_at_max_level() -> None:
    assert [attempt_level(n) for n in range(8)] == [0, 1, 2, 3, 4, 5, 5, 5]
    assert MAX_LEVEL == 5


def test_a_judge_failure_is_not_a_judged_score() -> None:
    assert is_judged(scored("e1"))
    failed = scored("e2").model_copy(update={
        "evaluation": f"{JUDGE_FAILED}: criterion B (judge failed: APITimeoutError)"})
    assert not is_judged(failed)
