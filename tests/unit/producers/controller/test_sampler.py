"""The sampling strategies (sampler.py): attempt-level weights, band shares, uniform draws.

Every draw is seeded, so the frequencies checked below are exact for the seed; the bounds
are loose enough to hold for any seed, so they check the strategy and not the generator.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from producers.controller.sampler import (
    LEVEL_WEIGHTS,
    eligible,
    level_weight,
    sample_tasks,
    with_attempts,
)
from webgym_common.choices import TrainPool
from webgym_common.events import Task, TaskHistory
from webgym_common.tasks import Band, band_of

NOW = "2026-01-01T00:00:00+00:00"


def task(task_id: str, difficulty: int = 1, domain: str = "sandbox-shop",
         attempt_level: int | None = None, split: str | None = "train") -> Task:
    return Task(task_id=task_id, task_name=f"task {task_id}", domain=domain,
                website=f"http://{domain}.test/", difficulty=difficulty,
                attempt_level=attempt_level, split=split)


def history(task_id: str, level: int) -> TaskHistory:
    return TaskHistory(task_id=task_id, attempt_level=level, updated_at=NOW)


def ids(tasks: list[Task]) -> list[str]:
    return [t.task_id for t in tasks]


def frequencies(draw_one, n: int = 4000, seed: int = 7) -> Counter[str]:  # noqa: ANN001
    rng = random.Random(seed)
    return Counter(ids(draw_one(rng))[0] for _ in range(n))


# -- attempt-level weights ------------------------------------------------------------


def test_weights_fall_tenfold_per_attempt_level() -> None:
    assert LEVEL_WEIGHTS == (100.0, 10.0, 1.0, 0.1, 0.01, 0.001)
    assert [level_weight(level) for level in range(6)] == [100, 10, 1, 0.1, 0.01, 0.001]


def test_levels_outside_the_table_are_clamped() -> None:
    assert level_weight(-3) == 100.0
    assert level_weight(6) == level_weight(42) == 0.001


def test_attempt_strategy_draws_in_proportion_to_the_weights() -> None:
    tasks = [task("new", attempt_level=0), task("seen", attempt_level=1),
             task("mastered", attempt_level=2)]
    counts = frequencies(lambda rng: sample_tasks(tasks, 1, "train", "attempt", rng=rng))
    total = sum(counts.values())
    # 100 : 10 : 1 -> 90.1%, 9.0%, 0.9%.
    assert 0.87 < counts["new"] / total < 0.93
    assert 0.07 < counts["seen"] / total < 0.11
    assert 0.002 < counts["mastered"] / total < 0.02


def test_history_overrides_the_catalog_attempt_level() -> None:
    tasks = [task("a", attempt_level=0), task("b", attempt_level=5)]
    # The history says a is mastered and b is new: b should now win nearly always.
    hist = {"a": history("a", 5), "b": history("b", 0)}
    counts = frequencies(
        lambda rng: sample_tasks(tasks, 1, "train", "attempt", history=hist, rng=rng))
    assert counts["b"] > 0.99 * sum(counts.values())


def test_a_task_without_history_or_level_counts_as_new() -> None:
    tasks = [task("unknown", attempt_level=None), task("level-1", attempt_level=1)]
    counts = frequencies(lambda rng: sample_tasks(tasks, 1, "train", "attempt", rng=rng))
    assert 0.87 < counts["unknown"] / sum(counts.values()) < 0.95  # 100 : 10


def test_attempt_is_the_default_strategy() -> None:
    tasks = [task("new", attempt_level=0), task("old", attempt_level=5)]
    counts = frequencies(lambda rng: sample_tasks(tasks, 1, "train", rng=rng), n=1000)
    assert counts["new"] >= 995


# -- uniform ----------------------------------------------------------------------------


def test_uniform_draws_every_task_equally_often() -> None:
    tasks = [task(f"t{i}", attempt_level=i) for i in range(4)]  # levels must not matter
    counts = frequencies(lambda rng: sample_tasks(tasks, 1, "train", "uniform", rng=rng))
    assert set(counts) == {"t0", "t1", "t2", "t3"}
    assert all(850 < c < 1150 for c in counts.values()), counts


def test_draws_are_without_replacement_until_the_pool_is_used_up() -> None:
    tasks = [task(f"t{i}") for i in range(5)]
    rng = random.Random(1)
    some = sample_tasks(tasks, 5, "train", "uniform", rng=rng)
    assert sorted(ids(some)) == ["t0", "t1", "t2", "t3", "t4"]
    # Asked for more than there are: the pool is drawn again, so each task twice, one thrice.
    more = Counter(ids(sample_tasks(tasks, 11, "train", "uniform", rng=rng)))
    assert sum(more.values()) == 11 and sorted(more.values()) == [2, 2, 2, 2, 3]
    assert sample_tasks([], 3, "train", "uniform", rng=rng) == []


def test_a_seed_fixes_the_draw_whatever_the_catalog_order() -> None:
    tasks = [task(f"t{i:02}", difficulty=1 + i % 9, attempt_level=i % 3) for i in range(30)]
    shuffled = random.Random(3).sample(tasks, len(tasks))
    for strategy in ("uniform", "attempt", "ratio"):
        first = sample_tasks(tasks, 8, "train", strategy, rng=random.Random(11))
        again = sample_tasks(shuffled, 8, "train", strategy, rng=random.Random(11))
        assert ids(first) == ids(again), strategy
        assert len(first) == 8


# -- ratio ------------------------------------------------------------------------------


def banded_pool() -> list[Task]:
    # Ten tasks per band, difficulties on both sides of each band edge.
    return [task(f"{d}-{i}", difficulty=d) for d in (1, 3, 4, 6, 7, 10) for i in range(5)]


def test_band_edges_are_the_shared_ones() -> None:
    assert [band_of(d) for d in (1, 3, 4, 6, 7, 10)] == [
        Band.EASY, Band.EASY, Band.MEDIUM, Band.MEDIUM, Band.HARD, Band.HARD]


def test_ratio_gives_each_band_its_share() -> None:
    ratios = {"easy": 0.4, "medium": 0.4, "hard": 0.2}
    picked = sample_tasks(banded_pool(), 10, "train", "ratio", ratios=ratios,
                          rng=random.Random(5))
    bands = Counter(band_of(t.difficulty) for t in picked)
    assert bands == {Band.EASY: 4, Band.MEDIUM: 4, Band.HARD: 2}
    assert len(set(ids(picked))) == 10  # uniform without replacement within a band


def test_ratio_shares_are_relative_and_a_missing_band_gets_none() -> None:
    picked = sample_tasks(banded_pool(), 9, "train", "ratio", ratios={"easy": 2, "hard": 1},
                          rng=random.Random(5))
    assert Counter(band_of(t.difficulty) for t in picked) == {Band.EASY: 6, Band.HARD: 3}


def test_ratio_defaults_to_thirds_and_gives_the_rounding_remainder_to_the_largest() -> None:
    nine = sample_tasks(banded_pool(), 9, "train", "ratio", rng=random.Random(2))
    assert Counter(band_of(t.difficulty) for t in nine) == {
        Band.EASY: 3, Band.MEDIUM: 3, Band.HARD: 3}
    ten = sample_tasks(banded_pool(), 10, "train", "ratio", rng=random.Random(2))
    assert Counter(band_of(t.difficulty) for t in ten) == {
        Band.EASY: 4, Band.MEDIUM: 3, Band.HARD: 3}


def test_ratio_is_uniform_within_a_band() -> None:
    pool = [task(f"e{i}", difficulty=2, attempt_level=i) for i in range(3)]
    counts = frequencies(lambda rng: sample_tasks(pool, 1, "train", "ratio",
                                                  ratios={"easy": 1.0}, rng=rng), n=3000)
    assert all(850 < c < 1150 for c in counts.values()), counts


# -- eligibility and errors ---------------------------------------------------------


def test_blocked_domains_are_skipped_in_training_only() -> None:
    tasks = [task("ok", domain="good.test"), task("walled", domain="walled.test")]
    assert ids(eligible(tasks, "train", {"walled.test"})) == ["ok"]
    held = [t.model_copy(update={"split": "test"}) for t in tasks]
    assert ids(eligible(held, "test", {"walled.test"})) == ["ok", "walled"]
    for strategy in ("uniform", "attempt", "ratio"):
        train = sample_tasks(tasks, 4, "train", strategy, blocked_domains={"walled.test"},
                             ratios={"easy": 1.0}, rng=random.Random(0))
        assert set(ids(train)) == {"ok"}, strategy
        test = sample_tasks(held, 2, "test", strategy, blocked_domains={"walled.test"},
                            ratios={"easy": 1.0}, rng=random.Random(0))
        assert sorted(ids(test)) == ["ok", "walled"], strategy


def test_an_unknown_strategy_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="uniform, ratio or attempt"):
        sample_tasks([task("a")], 1, "train", "greedy")


def test_each_split_draws_only_its_tasks_and_a_task_without_one_is_never_drawn() -> None:
    tasks = [task("legacy", split=None), task("tr"), task("te", split="test"),
             task("va", split="validation"), task("ood", domain="other", split="ood")]
    assert ids(eligible(tasks, "train", set())) == ["tr"]
    assert ids(eligible(tasks, "test", set())) == ["te"]
    assert ids(eligible(tasks, "validation", set())) == ["va"]
    assert ids(eligible(tasks, "ood", set())) == ["ood"]


def test_training_never_draws_a_train_task_the_leak_guard_refuses() -> None:
    ref = [{"action": "ANSWER", "text": "42"}]
    held = Task.model_validate({**task("held", split="test").model_dump(),
                                "reference_actions": ref})
    twin = Task.model_validate({**task("twin").model_dump(), "reference_actions": ref})
    other = Task.model_validate({**task("other").model_dump(),
                                 "reference_actions": [{"action": "ANSWER", "text": "7"}]})
    assert ids(eligible([held, twin, other], "train", set())) == ["other"]
    assert ids(sample_tasks([held, twin, other], 5, "train", "uniform",
                            rng=random.Random(0))) == ["other"] * 5


def test_the_rollout_pool_alone_when_asked_and_each_task_k_times() -> None:
    fresh = [task(f"fresh{i}").model_copy(update={"extra_json": '{"pool": "rollout"}'})
             for i in range(3)]
    tasks = [task("banked"), *fresh]
    assert ids(eligible(tasks, "train", set(), TrainPool.ROLLOUT)) == ["fresh0", "fresh1",
                                                                        "fresh2"]
    assert len(eligible(tasks, "train", set())) == 4
    drawn = sample_tasks(tasks, 2, "train", "uniform", rng=random.Random(3),
                         train_pool=TrainPool.ROLLOUT)
    assert len(set(ids(drawn))) == 2 and set(ids(drawn)) <= {"fresh0", "fresh1", "fresh2"}
    assert ids(with_attempts(drawn, 4, 7)) == [drawn[0].task_id] * 4 + [drawn[1].task_id] * 3
    assert with_attempts(drawn, 1, 2) == drawn
