"""The learning curve's files: curve.csv, per_task.csv, per_group.csv and curve.png.

One row per evaluation (version, suite, split) with its Wilson interval and, for a
version other than 0, McNemar's exact p against version 0 on the tasks both ran (the
same fixed held-out set: outcomes.compare_versions); empty where there is nothing to
pair. Each row has the same figures again for its novel-solution tasks alone (`novel_*`:
held-out tasks whose reference solution is no train task's), which copying a train
solution cannot solve. The scripted baseline (version -1, written "baseline") is a row like
the others and a dashed horizontal line per suite and split in the plot: the floor counting
reaches. The bank-only control (written "control-v1") is a row too, a star beside the last
version in the plot, and versus_control.csv pairs it with the last version of the policy's
own line (McNemar on all tasks and on the novel-solution ones).
The files are rewritten whole, each through a temporary file, so a reader never sees half
of one. `webgym curve` and the bench write them from webgym.evaluations and the scores.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from producers.controller.evaluate import BASELINE_EVAL_VERSION, version_cell, version_label
from producers.controller.outcomes import GroupRow, TaskOutcome, group_table, paired
from producers.controller.stats import mcnemar, wilson_interval
from webgym_common.events import EvaluationResult
from webgym_common.metrics.plots import integer_axis
from webgym_common.versions import is_control_eval

PER_TASK_COLUMNS = ("version", "suite", "split", "group", "task_id", "success", "novel")
PER_GROUP_COLUMNS = ("version", "suite", "split", "group", "successes", "n", "success_rate")
VERSUS_CONTROL_COLUMNS = ("suite", "split", "version", "control", "tasks", "only_version",
                          "only_control", "mcnemar_p", "novel_tasks", "novel_only_version",
                          "novel_only_control", "novel_mcnemar_p")


@dataclass(frozen=True)
class CurveRow:
    """One point of the curve (version -1: the scripted baseline)."""

    version: int
    suite: str
    split: str
    episodes: int
    successes: int
    success_rate: float
    ci_low: float
    ci_high: float
    mcnemar_p_vs_v0: float | None
    novel_episodes: int = 0
    novel_successes: int = 0
    novel_ci_low: float = 0.0
    novel_ci_high: float = 1.0
    novel_mcnemar_p_vs_v0: float | None = None

    @property
    def novel_success_rate(self) -> float:
        return self.novel_successes / self.novel_episodes if self.novel_episodes else 0.0


# version,suite,split,episodes,successes,success_rate,ci_low,ci_high,mcnemar_p_vs_v0,
# novel_episodes,novel_successes,novel_ci_low,novel_ci_high,novel_mcnemar_p_vs_v0
CURVE_COLUMNS = tuple(f.name for f in fields(CurveRow))


def curve_rows(results: Iterable[EvaluationResult], outcomes: Iterable[TaskOutcome] = (),
               ) -> list[CurveRow]:
    """A row per result (give one result per version, suite and split: one seed and one
    selection), by suite, split and version; the p against v0 from `outcomes`."""
    per_run: dict[tuple[int, str, str], list[TaskOutcome]] = {}
    for o in outcomes:
        per_run.setdefault((o.version, o.suite, o.split), []).append(o)
    def p_vs_v0(mine: list[TaskOutcome], v0: list[TaskOutcome], version: int) -> float | None:
        pairs = paired(mine, v0) if version != 0 else []
        return mcnemar(pairs).p if pairs else None

    rows = []
    for r in results:
        v0 = per_run.get((0, r.suite, r.split), [])
        mine = per_run.get((r.version, r.suite, r.split), [])
        novel = [o for o in mine if o.novel]
        solved = sum(o.success for o in novel)
        rows.append(CurveRow(
            r.version, r.suite, r.split, r.episodes, r.successes, r.success_rate, r.ci_low,
            r.ci_high, p_vs_v0(mine, v0, r.version), len(novel), solved,
            *wilson_interval(solved, len(novel)),
            p_vs_v0(novel, [o for o in v0 if o.novel], r.version)))
    return sorted(rows, key=lambda r: (r.suite, r.split, r.version))


@dataclass(frozen=True)
class VersusControl:
    """The policy's last version against the bank-only control on the same held-out tasks."""

    suite: str
    split: str
    version: int
    control: int
    tasks: int
    only_version: int  # tasks the version solved and the control did not
    only_control: int
    mcnemar_p: float
    novel_tasks: int
    novel_only_version: int
    novel_only_control: int
    novel_mcnemar_p: float


def versus_control(outcomes: Iterable[TaskOutcome]) -> list[VersusControl]:
    """Per suite and split with a control evaluated: the newest version of the policy's own
    line against each control, McNemar on all tasks and on the novel-solution ones."""
    runs: dict[tuple[str, str], dict[int, list[TaskOutcome]]] = {}
    for o in outcomes:
        runs.setdefault((o.suite, o.split), {}).setdefault(o.version, []).append(o)
    rows = []
    for (suite, split), by_version in sorted(runs.items()):
        own = [v for v in by_version if v >= 0 and not is_control_eval(v)]
        if not own:
            continue
        last = max(own)
        for control in sorted(v for v in by_version if is_control_eval(v)):
            mine, theirs = by_version[last], by_version[control]
            pairs = paired(mine, theirs)
            novel = paired([o for o in mine if o.novel], [o for o in theirs if o.novel])
            a, n = mcnemar(pairs), mcnemar(novel)
            rows.append(VersusControl(suite, split, last, control, len(pairs), a.b, a.c, a.p,
                                      len(novel), n.b, n.c, n.p))
    return rows


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(header)
        out.writerows(rows)
    os.replace(tmp, path)


def _cells(row: CurveRow | TaskOutcome | GroupRow) -> list[object]:
    cells: list[object] = list(astuple(row))
    cells[0] = version_cell_label(row.version)
    return ["" if c is None else int(c) if isinstance(c, bool) else c for c in cells]


def version_cell_label(version: int) -> str:
    """The CSVs' version column: the number, "baseline" or "control-v<N>"."""
    return version_label(version) if is_control_eval(version) else version_cell(version)


def plot_curve(rows: Sequence[CurveRow], path: Path, title: str = "") -> None:
    """Success per model version with Wilson error bars, a line per suite and split; the
    baseline as a dashed horizontal line in that line's colour."""
    fig = Figure(figsize=(8, 5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    lines = sorted({(r.suite, r.split) for r in rows})
    for i, (suite, split) in enumerate(lines):
        colour = f"C{i % 10}"
        mine = [r for r in rows if (r.suite, r.split) == (suite, split)]
        models = sorted((r for r in mine if r.version >= 0 and not is_control_eval(r.version)),
                        key=lambda r: r.version)
        if models:
            x = [r.version + (i - (len(lines) - 1) / 2) * 0.05 for r in models]  # apart
            err = [[r.success_rate - r.ci_low for r in models],
                   [r.ci_high - r.success_rate for r in models]]
            ax.errorbar(x, [r.success_rate for r in models], yerr=err, marker="o", capsize=4,
                        color=colour, label=f"{suite} {split} (n={models[0].episodes})")
        for b in (r for r in mine if r.version == BASELINE_EVAL_VERSION):
            ax.axhline(b.success_rate, color=colour, linestyle="--", linewidth=1,
                       label=f"{suite} {split} baseline ({b.successes}/{b.episodes})")
        last = max((r.version for r in models), default=0)
        for c in (r for r in mine if is_control_eval(r.version)):
            ax.errorbar([last + 0.25], [c.success_rate], yerr=[[c.success_rate - c.ci_low],
                        [c.ci_high - c.success_rate]], marker="*", markersize=12, capsize=4,
                        color=colour, linestyle="none",
                        label=f"{suite} {split} {version_label(c.version)} (bank only)")
    integer_axis(ax, [r.version for r in rows if r.version >= 0
                      and not is_control_eval(r.version)], "model version (0: base model)")
    ax.set_ylabel("success rate (95 % Wilson interval)")
    ax.set_ylim(-0.02, 1.02)
    if title:
        ax.set_title(title)
    if lines:
        ax.legend(fontsize="small")
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=90)
    os.replace(tmp, path)


def write_curve(rows: Sequence[CurveRow], out_dir: Path,
                per_task: Sequence[TaskOutcome] = (), title: str = "") -> list[Path]:
    """curve.csv, per_task.csv, per_group.csv, curve.png and, with a control evaluated,
    versus_control.csv in `out_dir` (made if need be); returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    curve, tasks, groups, png = (out_dir / n for n in (
        "curve.csv", "per_task.csv", "per_group.csv", "curve.png"))
    _write_csv(curve, CURVE_COLUMNS, (_cells(r) for r in rows))
    ordered = sorted(per_task, key=lambda o: (o.suite, o.split, o.version, o.task_id))
    _write_csv(tasks, PER_TASK_COLUMNS, (_cells(o) for o in ordered))
    _write_csv(groups, PER_GROUP_COLUMNS,
               ([*_cells(g), g.success_rate] for g in group_table(per_task)))
    plot_curve(rows, png, title)
    paths = [curve, tasks, groups, png]
    if against := versus_control(per_task):
        paths.append(out_dir / "versus_control.csv")
        _write_csv(paths[-1], VERSUS_CONTROL_COLUMNS,
                   ([*astuple(r)[:2], version_label(r.version), version_label(r.control),
                     *astuple(r)[4:]] for r in against))
    return paths
