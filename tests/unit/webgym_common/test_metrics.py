"""compute_metrics on hand-built scored episodes: each rate's denominator, repeats, GoBack,
judge failures; the CSV and PNG written from the metrics table; and the fold that keeps
published metrics right (late scores, numbers published from partial scores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import sample_event
from tests.unit.scored import scored
from webgym_common.events import EpisodeScored, IterationClosed, utc_now
from webgym_common.history import JUDGE_FAILED
from webgym_common.metrics import (
    CSV_COLUMNS,
    MetricsFold,
    compute_metrics,
    print_metrics,
    same_numbers,
    write_outputs,
)


def test_each_rate_has_its_own_denominator() -> None:
    eps = [
        scored("c1", crashed=True, reward=1.0, actions=()),  # crashed: only in crashed_rate
        scored("c2", crashed=True, blocked=True),
        scored("b1", blocked=True, reward=1.0, actions=("GoBack",) * 4),  # blocked: not valid
        scored("ok1", reward=1.0, actions=("Click [1]", "GoBack", "ANSWER [a]")),
        scored("ok2", reward=0.0, actions=("Click [2]",) * 5),
        scored("ok3", reward=1.0, actions=("Type [3] [q]", "ANSWER [b]")),
    ]
    m = compute_metrics(3, "train", eps)
    assert m.iteration == 3 and m.split == "train" and m.episodes == 6
    assert m.crashed_rate == pytest.approx(2 / 6)  # over all
    assert m.blocked_rate == pytest.approx(1 / 4)  # over the 4 non-crashed
    assert m.success_rate == pytest.approx(2 / 3)  # over the 3 non-crashed, non-blocked
    assert m.avg_steps == pytest.approx((3 + 5 + 2) / 3)
    assert m.goback_rate == pytest.approx(1 / 10)  # the blocked episode's GoBacks don't count
    assert m.evaluator_version == "judge-1"


def test_avg_chars_per_response_is_over_trajectory_entries() -> None:
    eps = [
        scored("a", actions=("Click [1]", "Click [2]"), responses=("x" * 10, "x" * 30)),
        scored("b", actions=("Wait",), responses=("x" * 110,)),
        scored("c", crashed=True, actions=("Wait",), responses=("x" * 10_000,)),
    ]
    assert compute_metrics(3, "train", eps).avg_chars_per_response == pytest.approx(50.0)


def test_goback_counts_only_parsed_goback_actions() -> None:
    actions = ("GoBack", "goback", " GoBack ", "GoBack [3]", "Click [1]", "Scroll [WINDOW] [up]",
               "ANSWER [GoBack]", "Visit [http://goback/]")
    m = compute_metrics(3, "train", [scored("g", actions=actions)])
    # GoBack with an argument is an Invalid action; the answer text is not an action.
    assert m.goback_rate == pytest.approx(3 / 8)


def test_repeated_episode_ids_count_once_first_record_wins() -> None:
    first = scored("dup", reward=1.0)
    again = scored("dup", reward=0.0, crashed=True)
    m = compute_metrics(3, "train", [first, again, first, scored("other", reward=0.0)])
    assert m.episodes == 2
    assert m.crashed_rate == 0.0
    assert m.success_rate == pytest.approx(0.5)


def test_other_iterations_and_splits_are_left_out() -> None:
    eps = [scored("a", reward=1.0), scored("b", iteration=4), scored("c", split="test")]
    m = compute_metrics(3, "train", eps)
    assert m.episodes == 1 and m.success_rate == 1.0


def test_empty_iteration_is_all_zero_not_an_error() -> None:
    m = compute_metrics(7, "test", [])
    assert m.episodes == 0 and m.split == "test" and m.evaluator_version == ""
    assert (m.crashed_rate, m.blocked_rate, m.success_rate) == (0.0, 0.0, 0.0)
    assert (m.avg_steps, m.avg_chars_per_response, m.goback_rate) == (0.0, 0.0, 0.0)
    only_crashed = compute_metrics(7, "train", [scored("x", iteration=7, crashed=True)])
    assert only_crashed.crashed_rate == 1.0 and only_crashed.success_rate == 0.0


def test_outputs_are_one_row_per_iteration_and_a_png(tmp_path: Path) -> None:
    table = {it: compute_metrics(it, "train", [scored(f"e{it}", iteration=it, reward=1.0)])
             for it in (2, 1)}
    csv_path = tmp_path / "m" / "metrics.csv"
    write_outputs(table, csv_path)
    table[2] = compute_metrics(2, "train", [])
    write_outputs(table, csv_path)  # rewritten, not appended
    lines = csv_path.read_text().splitlines()
    assert lines[0].split(",") == list(CSV_COLUMNS)
    assert [line.split(",")[:3] for line in lines[1:]] == [["1", "train", "1"], ["2", "train", "0"]]
    assert (tmp_path / "m" / "metrics.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    print_metrics(table.values())


# -- the fold that keeps them right ------------------------------------------------------


def closed(iteration: int) -> IterationClosed:
    close = sample_event("IterationClosed").model_copy(
        update={"iteration": iteration, "split": "train"})
    assert isinstance(close, IterationClosed)
    return close


def judge_failed(episode_id: str) -> EpisodeScored:
    return scored(episode_id).model_copy(update={"evaluation": f"{JUDGE_FAILED}: blocking"})


def test_closed_iterations_are_reported_once_and_again_on_late_episodes() -> None:
    fold = MetricsFold()
    fold.fold([scored("a", reward=1.0), scored("z", iteration=4)])
    assert fold.changed() == []  # nothing closed yet
    fold.fold([closed(3), scored("a")])
    (m,) = fold.changed()
    assert (m.iteration, m.episodes, m.success_rate) == (3, 1, 1.0)
    fold.table[3] = m  # published
    assert fold.changed() == []
    fold.fold([scored("late", reward=0.0)])
    (m2,) = fold.changed()
    assert m2.episodes == 2 and m2.success_rate == 0.5 and not same_numbers(m2, m)
    assert same_numbers(m2, m2.model_copy(update={"event_id": "other"}))


def test_numbers_published_by_someone_else_from_partial_scores_are_corrected() -> None:
    """A controller closed iteration 3 having seen one score and published that; the fold
    has both and publishes the right numbers again, and nothing once they are there."""
    fold = MetricsFold()
    fold.fold([closed(3), scored("a", reward=1.0), scored("b", reward=0.0)])
    (right,) = fold.changed()
    fold.table[3] = right
    partial = compute_metrics(3, "train", [scored("a", reward=1.0)])
    fold.fold([partial])
    (again,) = fold.changed()
    assert same_numbers(again, right) and again.episodes == 2
    fold.fold([again])
    assert fold.changed() == []


def test_unchanged_numbers_are_not_published_again_after_a_restart() -> None:
    first = MetricsFold()
    first.fold([closed(1), scored("a", iteration=1, reward=1.0)])
    (m,) = first.changed()
    restarted = MetricsFold({1: m.model_copy(update={"event_id": "x", "produced_at": utc_now()})})
    restarted.fold([m, closed(1), scored("a", iteration=1, reward=1.0)])
    assert restarted.changed() == []


def test_judge_failures_are_not_episodes_of_the_metrics() -> None:
    eps = [scored("a", reward=1.0), judge_failed("b"), judge_failed("c")]
    m = compute_metrics(3, "train", eps)
    assert m.episodes == 1 and m.success_rate == 1.0
    fold = MetricsFold()
    fold.fold([closed(3), *eps])
    (folded,) = fold.changed()
    assert same_numbers(folded, m)
