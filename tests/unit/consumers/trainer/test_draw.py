"""WebGym's recency-biased draw, the window, staleness and dedupe (consumers/trainer/draw.py).

Expected draws are computed by hand from the weights and the uniforms each pick uses.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest

from consumers.trainer.draw import (
    dedupe,
    draw,
    draw_positions,
    fresh_enough,
    recency_weights,
    window,
)


def test_weights_are_position_plus_one_to_the_power_and_p1_is_uniform() -> None:
    assert recency_weights(4, 2.0) == [1.0, 4.0, 9.0, 16.0]
    assert recency_weights(3, 3.0) == [1.0, 8.0, 27.0]
    assert recency_weights(3, 0.5) == pytest.approx([1.0, 2 ** 0.5, 3 ** 0.5])
    # WebGym's own uniform branch for p == 1.0, not the linear weights (i+1)^1
    assert recency_weights(4, 1.0) == [1.0, 1.0, 1.0, 1.0]
    assert recency_weights(3, 0.0) == [1.0, 1.0, 1.0]


def test_p2_draw_by_hand() -> None:
    # weights 1, 4, 9 (sum 14); u=0.5 -> 7: cumulative 1, 5, 14 -> position 2.
    # left 0, 1 with 1, 4 (sum 5); u=0.5 -> 2.5: cumulative 1, 5 -> position 1.
    assert draw_positions(3, 2, 2.0, iter([0.5, 0.5])) == [2, 1]
    # u=0.05 -> 0.7 < 1: position 0; left 1, 2 with 4, 9 (sum 13); u=0.3 -> 3.9 < 4: position 1
    assert draw_positions(3, 2, 2.0, iter([0.05, 0.3])) == [0, 1]


def test_p1_draw_by_hand_is_uniform() -> None:
    # weights 1, 1, 1, 1; u=0.3 -> 1.2: cumulative 1, 2 -> position 1.
    # left 0, 2, 3 (sum 3); u=0.9 -> 2.7: cumulative 1, 2, 3 -> position 3.
    assert draw_positions(4, 2, 1.0, iter([0.3, 0.9])) == [1, 3]
    assert draw_positions(4, 2, 0.0, iter([0.3, 0.9])) == [1, 3]


def test_p3_single_pick_boundaries() -> None:
    # weights 1, 8 (sum 9): u=0.1 -> 0.9 < 1 -> position 0; u=0.12 -> 1.08 >= 1 -> position 1
    assert draw_positions(2, 1, 3.0, iter([0.1])) == [0]
    assert draw_positions(2, 1, 3.0, iter([0.12])) == [1]
    # a uniform at the very top still picks a remaining position
    assert draw_positions(2, 1, 3.0, iter([0.9999999999999999])) == [1]


def test_asking_for_all_or_more_returns_all_in_order_without_drawing() -> None:
    assert draw_positions(3, 3, 2.0, iter([])) == [0, 1, 2]
    assert draw_positions(3, 10, 2.0, iter([])) == [0, 1, 2]
    assert draw_positions(0, 5, 2.0, iter([])) == []
    assert draw_positions(3, 0, 2.0, iter([])) == []


def test_seeded_draw_is_reproducible_and_by_hand() -> None:
    # random.Random(1) gives 0.13436424411240122, 0.8474337369372327, ...
    # weights 1, 4, 9, 16 (sum 30): 4.03 -> cumulative 1, 5 -> "b";
    # left a, c, d with 1, 9, 16 (sum 26): 22.03 -> cumulative 1, 10, 26 -> "d".
    assert draw(["a", "b", "c", "d"], 2, 2.0, seed=1) == ["b", "d"]
    assert draw(["a", "b", "c", "d"], 2, 2.0, seed=1) == ["b", "d"]
    # uniform (p = 1): 0.134 x 4 = 0.54 -> "a"; 0.847 x 3 = 2.54 -> "d" (left b, c, d)
    assert draw(["a", "b", "c", "d"], 2, 1.0, seed=1) == ["a", "d"]


def test_without_replacement_and_recency_favoured() -> None:
    firsts: Counter[int] = Counter()
    for seed in range(2000):
        got = draw(list(range(5)), 3, 2.0, seed)
        assert len(set(got)) == 3
        firsts[got[0]] += 1
    # first pick: probabilities 1/55, 4/55, 9/55, 16/55, 25/55
    assert firsts[4] > firsts[3] > firsts[2] > firsts[1] > firsts[0]
    assert abs(firsts[4] / 2000 - 25 / 55) < 0.04


@dataclass(frozen=True)
class S:
    name: str
    iteration: int


def test_window_keeps_the_last_n_iterations_then_the_newest_capacity() -> None:
    samples = [S("a", 0), S("b", 1), S("c", 2), S("d", 3), S("e", 4), S("f", 5)]
    # the last 4 up to iteration 4: 1..4; iteration 5 is after the trigger
    assert [s.name for s in window(samples, 4, 4, 100)] == ["b", "c", "d", "e"]
    assert [s.name for s in window(samples, 4, 4, 2)] == ["d", "e"]
    assert [s.name for s in window(samples, 0, 4, 100)] == ["a"]
    assert [s.name for s in window(samples, 5, 1, 100)] == ["f"]


def test_staleness_current_minus_theirs_at_most_k() -> None:
    assert fresh_enough("v3", 3, 0)
    assert not fresh_enough("v2", 3, 0)
    assert fresh_enough("v2", 3, 1)
    assert not fresh_enough("v1", 3, 1)
    assert fresh_enough("base", 0, 0)
    assert not fresh_enough("base", 1, 0)
    assert fresh_enough("base", 1, 1)
    # demonstrations are off-policy by construction: no version makes them stale
    assert fresh_enough("demonstration", 9, 0)


def test_dedupe_first_wins() -> None:
    items = [("x", 1), ("y", 2), ("x", 3)]
    assert dedupe(items, key=lambda t: t[0]) == [("x", 1), ("y", 2)]
