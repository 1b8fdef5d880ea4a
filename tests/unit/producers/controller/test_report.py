"""The learning curve's files (report.py): read back, value by value."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from producers.controller.outcomes import TaskOutcome
from producers.controller.report import CURVE_COLUMNS, curve_rows, versus_control, write_curve
from producers.controller.stats import wilson_interval
from tests.factories import sample_event
from webgym_common.events import EvaluationResult


def result(version: int, suite: str, successes: int, n: int) -> EvaluationResult:
    base = sample_event("EvaluationResult")
    assert isinstance(base, EvaluationResult)
    low, high = wilson_interval(successes, n)
    return base.model_copy(update={
        "version": version, "suite": suite, "split": "test", "episodes": n,
        "successes": successes, "success_rate": successes / n, "ci_low": low, "ci_high": high})


def outcomes(version: int, suite: str, solved: set[int], n: int) -> list[TaskOutcome]:
    """Tasks t00..; the even ones have a novel solution."""
    return [TaskOutcome(version, suite, "test", f"g{i % 2}", f"t{i:02d}", i in solved,
                        novel=i % 2 == 0) for i in range(n)]


RESULTS = [result(1, "sandbox", 8, 10), result(0, "sandbox", 2, 10),
           result(-1, "sandbox", 1, 10), result(0, "miniwob", 3, 4)]
OUTCOMES = (outcomes(0, "sandbox", {0, 1}, 10) + outcomes(1, "sandbox", set(range(8)), 10)
            + outcomes(-1, "sandbox", {0}, 10))


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_last_version_is_paired_with_the_control_on_all_and_novel_tasks(
        tmp_path: Path) -> None:
    control = outcomes(1001, "sandbox", {0, 1, 2, 3}, 10)  # v1 solved t00-t07
    rows = versus_control([*OUTCOMES, *control])
    assert [(r.version, r.control, r.tasks) for r in rows] == [(1, 1001, 10)]
    r = rows[0]
    assert (r.only_version, r.only_control) == (4, 0)
    assert r.mcnemar_p == pytest.approx(0.125)
    assert (r.novel_tasks, r.novel_only_version, r.novel_only_control) == (5, 2, 0)
    results = [*RESULTS, result(1001, "sandbox", 4, 10)]
    paths = write_curve(curve_rows(results, [*OUTCOMES, *control]), tmp_path,
                        [*OUTCOMES, *control])
    assert paths[-1].name == "versus_control.csv"
    assert read(paths[-1])[0]["control"] == "control-v1"
    assert {row["version"] for row in read(tmp_path / "curve.csv")} >= {"control-v1", "1"}


def test_rows_carry_the_novel_solution_tasks_apart() -> None:
    v1 = next(r for r in curve_rows(RESULTS, OUTCOMES) if (r.suite, r.version) == ("sandbox", 1))
    # v1 solved t00-t07: of the novel t00, t02, ..., t08 that is four of five; v0 (t00, t01)
    # solved one of them, so v1 alone solved three novel tasks
    assert (v1.novel_episodes, v1.novel_successes) == (5, 4)
    assert v1.novel_success_rate == 0.8
    assert (v1.novel_ci_low, v1.novel_ci_high) == pytest.approx(wilson_interval(4, 5))
    assert v1.novel_mcnemar_p_vs_v0 == pytest.approx(0.25)


def test_rows_carry_mcnemar_against_v0_on_the_same_tasks() -> None:
    rows = curve_rows(RESULTS, OUTCOMES)
    assert [(r.suite, r.version) for r in rows] == [
        ("miniwob", 0), ("sandbox", -1), ("sandbox", 0), ("sandbox", 1)]
    by = {(r.suite, r.version): r for r in rows}
    assert by[("sandbox", 1)].mcnemar_p_vs_v0 == pytest.approx(2 / 64)  # b=6, c=0
    assert by[("sandbox", -1)].mcnemar_p_vs_v0 == pytest.approx(1.0)  # b=0, c=1
    assert by[("sandbox", 0)].mcnemar_p_vs_v0 is None
    assert by[("miniwob", 0)].mcnemar_p_vs_v0 is None
    assert curve_rows(RESULTS)[3].mcnemar_p_vs_v0 is None  # no outcomes: nothing to pair


def test_write_curve_writes_the_csvs_and_a_png(tmp_path: Path) -> None:
    out = tmp_path / "curve"
    paths = write_curve(curve_rows(RESULTS, OUTCOMES), out, OUTCOMES, title="t")
    assert [p.name for p in paths] == ["curve.csv", "per_task.csv", "per_group.csv",
                                       "curve.png"]
    with (out / "curve.csv").open() as fh:
        assert fh.readline().strip() == ("version,suite,split,episodes,successes,success_rate,"
                                         "ci_low,ci_high,mcnemar_p_vs_v0,novel_episodes,novel_successes,"
                                         "novel_ci_low,novel_ci_high,novel_mcnemar_p_vs_v0")
    assert CURVE_COLUMNS == tuple(read(out / "curve.csv")[0])
    curve = {(r["suite"], r["version"]): r for r in read(out / "curve.csv")}
    assert set(curve) == {("miniwob", "0"), ("sandbox", "baseline"), ("sandbox", "0"),
                          ("sandbox", "1")}
    v1 = curve[("sandbox", "1")]
    assert (v1["episodes"], v1["successes"], float(v1["success_rate"])) == ("10", "8", 0.8)
    assert (float(v1["ci_low"]), float(v1["ci_high"])) == pytest.approx(wilson_interval(8, 10))
    assert float(v1["mcnemar_p_vs_v0"]) == pytest.approx(0.03125)
    assert curve[("sandbox", "0")]["mcnemar_p_vs_v0"] == ""

    tasks = read(out / "per_task.csv")
    assert list(tasks[0]) == ["version", "suite", "split", "group", "task_id", "success",
                              "novel"]
    assert len(tasks) == 30
    first = [t for t in tasks if t["version"] == "baseline"]
    assert [(t["task_id"], t["success"]) for t in first[:2]] == [("t00", "1"), ("t01", "0")]
    groups = {(g["version"], g["group"]): g for g in read(out / "per_group.csv")}
    assert (groups[("1", "g0")]["successes"], groups[("1", "g0")]["n"]) == ("4", "5")
    assert float(groups[("0", "g1")]["success_rate"]) == pytest.approx(0.2)

    png = (out / "curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    assert not list(out.glob("*.tmp"))


def test_write_curve_of_nothing_still_writes_headers(tmp_path: Path) -> None:
    write_curve([], tmp_path)
    assert (tmp_path / "curve.csv").read_text().strip() == ",".join(CURVE_COLUMNS)
    assert (tmp_path / "curve.png").exists()
