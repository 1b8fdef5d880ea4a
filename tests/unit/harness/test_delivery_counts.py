"""harness/delivery_counts.py: percentiles, and lost and duplicated steps and episodes
counted from the topics' events."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from harness.delivery_counts import count_steps, delivery_notes, episode_outcomes, percentile
from webgym_common.events import EpisodeCompleted, EpisodeScored

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def completed(eid: str, termination: str = "max_steps") -> EpisodeCompleted:
    return EpisodeCompleted(episode_id=eid, task_id="t", iteration=0, split="train", steps=2,
                            termination=termination, started_at=T0)


def scored(eid: str) -> EpisodeScored:
    return EpisodeScored(episode_id=eid, task_id="t", domain="bench", iteration=0,
                         split="train", reward=0.0, evaluation="", is_blocked=False,
                         crashed=False, submit=False, termination="max_steps", steps=2,
                         evaluator_version="rules", policy_version="bench")


@pytest.mark.parametrize(("q", "want"), [(0.5, 50.0), (0.99, 99.0), (1.0, 100.0), (0.001, 1.0)])
def test_percentile_is_the_nearest_rank(q: float, want: float) -> None:
    values = [float(v) for v in range(100, 0, -1)]  # order does not matter
    assert percentile(values, q) == want


def test_percentile_of_few_and_of_none() -> None:
    assert percentile([3.0], 0.99) == 3.0
    assert percentile([1.0, 2.0], 0.5) == 1.0
    assert percentile((v for v in [5.0, 1.0, 9.0]), 0.99) == 9.0  # any iterable
    assert math.isnan(percentile([], 0.5))


def test_count_steps_finds_missing_and_doubled_steps_and_ignores_the_rest() -> None:
    actions = [
        ("a", 0, "x1"), ("a", 1, "x2"),  # complete
        ("b", 0, "y1"), ("b", 0, "y1"),  # step 0 read twice (one record, same id); 1 missing
        ("c", 0, "z1"), ("c", 0, "z2"), ("c", 1, "z3"),  # step 0 decided twice
        ("c", 5, "z9"), ("other", 0, "o1"),  # beyond the expected steps, another episode
    ]
    got = count_steps(actions, {"a": 2, "b": 2, "c": 2, "d": 1})
    assert got.steps == 7
    assert got.lost == {"b": [1], "d": [0]} and got.lost_steps == 2
    assert got.duplicated == {"c": [0]} and got.duplicated_steps == 1


def test_episode_outcomes_counts_lost_and_duplicated_per_requested_episode() -> None:
    requested = {e: "t" for e in ("ok", "never-done", "never-scored", "done-twice",
                                  "scored-twice")}
    done = [completed(e) for e in ("ok", "never-scored", "done-twice", "done-twice",
                                   "scored-twice", "not-ours")]
    scores = [scored(e) for e in ("ok", "done-twice", "scored-twice", "scored-twice",
                                  "not-ours")]
    t = episode_outcomes(requested, done, scores)
    assert (t.episodes, t.lost, t.duplicated) == (5, 2, 2)
    notes = delivery_notes(t, count_steps([], {"ok": 1}))
    assert any("never completed: never-done" in n for n in notes)
    assert any("never scored: never-scored" in n for n in notes)
    assert any("completed twice: done-twice" in n for n in notes)
    assert any("scored twice: scored-twice" in n for n in notes)
    assert any(n.startswith("1 steps without an action: ok [0]") for n in notes)


def test_a_clean_run_has_no_delivery_notes() -> None:
    t = episode_outcomes({"a": "t"}, [completed("a")], [scored("a")])
    assert (t.lost, t.duplicated) == (0, 0)
    assert delivery_notes(t, count_steps([("a", 0, "x")], {"a": 1})) == []
