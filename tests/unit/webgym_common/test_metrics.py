"""compute_metrics on hand-built scored episodes: each rate's denominator, repeats, GoBack,
judge failures; the CSV and PNG written from the metrics table; the fold that keeps
published metrics right (late scores, numbers published from partial scores); and the
demonstrations, counted apart from the policy's own episodes."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import fastavro
import pytest
from rich.console import Console

from tests.factories import sample_event
from tests.unit.scored import scored
from webgym_common.codec import SINGLE_OBJECT_MAGIC, Codec
from webgym_common.events import EpisodeScored, IterationClosed, RolloutMetrics, utc_now
from webgym_common.history import JUDGE_FAILED
from webgym_common.metrics.fold import (
    CSV_COLUMNS,
    MetricsFold,
    compute_metrics,
    policy_episodes,
    same_numbers,
)
from webgym_common.metrics.plots import metrics_figure, print_metrics
from webgym_common.metrics.storage import write_outputs
from webgym_common.versions import DEMONSTRATION_VERSION


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


# -- demonstrations: counted apart, never the policy's success -----------------------------


def demo(episode_id: str, **kw: object) -> EpisodeScored:
    """A teacher-forced episode as the pipeline scores it (policy_version "demonstration")."""
    return scored(episode_id, **kw).model_copy(  # type: ignore[arg-type]
        update={"policy_version": DEMONSTRATION_VERSION})


def mixed_iteration() -> list[EpisodeScored]:
    """4 demonstrations that all succeed, 4 policy episodes of which 1 succeeds."""
    return ([demo(f"d{i}", reward=1.0) for i in range(4)]
            + [scored(f"p{i}", reward=1.0 if i == 0 else 0.0) for i in range(4)])


def test_success_rate_is_the_policys_own_demonstrations_apart() -> None:
    m = compute_metrics(3, "train", mixed_iteration())
    assert m.success_rate == 0.25 and m.demonstration_success_rate == 1.0
    assert (m.episodes, m.demonstrations, policy_episodes(m)) == (8, 4, 4)


def test_every_rate_leaves_the_demonstrations_out() -> None:
    eps = [demo("d1", crashed=True), demo("d2", blocked=True), demo("d3", reward=1.0,
           actions=("GoBack",) * 9), demo("d4", reward=0.0),
           scored("p1", reward=1.0, actions=("Click [1]", "GoBack", "ANSWER [a]"))]
    m = compute_metrics(3, "train", eps)
    assert (m.crashed_rate, m.blocked_rate, m.success_rate) == (0.0, 0.0, 1.0)
    assert (m.avg_steps, m.goback_rate) == (3.0, pytest.approx(1 / 3))
    assert m.demonstration_success_rate == 0.5  # over the 2 valid demonstrations
    only_demos = compute_metrics(3, "train", [demo("d", reward=1.0)])
    assert only_demos.success_rate == 0.0 and only_demos.demonstration_success_rate == 1.0
    assert policy_episodes(only_demos) == 0


def test_the_files_and_the_table_show_the_demonstrations_apart(tmp_path: Path) -> None:
    csv_path = tmp_path / "metrics.csv"
    write_outputs({0: compute_metrics(3, "train", mixed_iteration())}, csv_path)
    (row,) = csv.DictReader(csv_path.open())
    assert set(row) == set(CSV_COLUMNS)
    assert (row["episodes"], row["policy_episodes"], row["demonstrations"]) == ("8", "4", "4")
    assert (float(row["success_rate"]), float(row["demonstration_success_rate"])) == (0.25, 1.0)
    console = Console(record=True, width=160)  # a worker's log
    print_metrics(compute_metrics(3, "train", mixed_iteration()), console)
    text = console.export_text()
    assert "success_rate" in text and "demos" in text and "…" not in text  # nothing cut
    values = text.splitlines()[-2].replace("│", " ").split()
    assert values[:5] == ["3", "train", "8", "4", "4"] and values[-1] == "1.000"
    assert values[7] == "0.250"  # success_rate: the policy's 1 of 4


def test_an_old_record_without_the_demonstration_fields_still_decodes() -> None:
    """Written with the archived schema (before demonstrations were counted apart): the new
    fields take their defaults, and the policy's episodes are all of them."""
    codec = Codec()
    (old,) = [s for s in codec.schemas.by_fingerprint.values()
              if s.name == "RolloutMetrics" and s.fingerprint.hex().startswith("9890e688")]
    record = compute_metrics(3, "train", [scored("a", reward=1.0)]).to_avro()
    record = {k: v for k, v in record.items()
              if k not in ("demonstrations", "demonstration_success_rate")}
    body = io.BytesIO()
    fastavro.schemaless_writer(body, old.parsed, record)
    m = codec.decode(SINGLE_OBJECT_MAGIC + old.fingerprint + body.getvalue())
    assert isinstance(m, RolloutMetrics)
    assert (m.episodes, m.success_rate, m.demonstrations, m.demonstration_success_rate) == (
        1, 1.0, 0, 0.0)
    assert policy_episodes(m) == 1


def test_an_old_record_that_counted_demonstrations_is_corrected_by_the_fold() -> None:
    fold = MetricsFold()
    old = compute_metrics(3, "train", mixed_iteration()).model_copy(
        update={"success_rate": 5 / 8, "demonstrations": 0, "demonstration_success_rate": 0.0})
    fold.fold([closed(3), *mixed_iteration(), old])
    (m,) = fold.changed()
    assert (m.success_rate, m.demonstrations) == (0.25, 4)


def test_the_plot_has_integer_iteration_ticks_even_with_one_point() -> None:
    for its in ([0], [2, 3], list(range(40))):
        mixed = compute_metrics(3, "train", mixed_iteration())
        fig = metrics_figure([mixed.model_copy(update={"iteration": i}) for i in its])
        fig.canvas.draw()
        for ax in fig.axes:
            lo, hi = ax.get_xlim()
            ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
            assert ticks and all(float(t).is_integer() for t in ticks), (its, ticks)
            assert lo < min(its) and max(its) < hi
    (success,) = [ax for ax in fig.axes if ax.get_title().startswith("success_rate")]
    styles = {line.get_label(): line.get_linestyle() for line in success.get_lines()}
    assert styles == {"policy": "-", "demonstrations (not counted)": ":"}


def test_no_demonstrations_no_dotted_line() -> None:
    fig = metrics_figure([compute_metrics(0, "train", [scored("a", iteration=0)])])
    (success,) = [ax for ax in fig.axes if ax.get_title().startswith("success_rate")]
    assert [line.get_label() for line in success.get_lines()] == ["policy"]


def test_an_integer_axis_with_one_point_shows_that_integer_and_no_fractions() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from webgym_common.metrics.plots import integer_axis

    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.plot([0], [0.3], marker="o")
    integer_axis(ax, [0], "model version")
    fig.canvas.draw()
    assert ax.get_xlim() == (-0.5, 0.5)
    ticks = [t for t in ax.get_xticks() if -0.5 <= t <= 0.5]
    assert ticks == [0] and ax.get_xlabel() == "model version"
