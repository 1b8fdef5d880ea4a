"""The run's held-out report: every evaluated version beside the baseline, a table and files.

Read-only: everything comes from the log (webgym.evaluations, webgym.episodes.scored,
webgym.models, webgym.tasks), so the report of a finished or resumed run is the same
whenever it is made. It shows, per version: held-out success per suite and split (n, the
95 % Wilson interval, McNemar's paired p against v0 on the same tasks), the policy's own
success in the training iteration that ran on it (demonstrations apart, never in it) and
how many rows the version was trained on. The files (curve.csv, per_task.csv,
per_group.csv, curve.png) are producers.controller.report's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from producers.catalog import load_task_catalog
from producers.controller.evaluate import (
    BASELINE_EVAL_VERSION,
    evaluation_key,
    evaluation_runs,
    version_label,
)
from producers.controller.outcomes import TaskOutcome, task_outcomes
from producers.controller.report import (
    CurveRow,
    VersusControl,
    curve_rows,
    versus_control,
    write_curve,
)
from webgym_common.choices import Split, Suite
from webgym_common.config import Settings
from webgym_common.events import (
    EpisodeScored,
    EvaluationResult,
    ModelVersion,
    RolloutMetrics,
    TrainingProgress,
)
from webgym_common.metrics.fold import policy_episodes
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_compacted, read_to_end
from webgym_common.topics import Topic
from webgym_common.versions import CONTROL_EVAL_OFFSET, control_model


def rate_cell(successes: int, n: int, low: float, high: float, p: float | None) -> str:
    rate = successes / n if n else 0.0
    return (f"{successes}/{n} {rate:.0%} [{low:.0%}, {high:.0%}]"
            + ("" if p is None else " " + p_text(p)))


def heldout_cell(row: CurveRow) -> str:
    return rate_cell(row.successes, row.episodes, row.ci_low, row.ci_high, row.mcnemar_p_vs_v0)


def novel_cell(row: CurveRow) -> str:
    """The same on the row's novel-solution tasks alone."""
    if not row.novel_episodes:
        return "-"
    return rate_cell(row.novel_successes, row.novel_episodes, row.novel_ci_low,
                     row.novel_ci_high, row.novel_mcnemar_p_vs_v0)


def train_cell(m: RolloutMetrics | None) -> str:
    """The policy's own success in an iteration (demonstrations are counted apart)."""
    if m is None:
        return "-"
    demos = f" (+{m.demonstrations} demos apart)" if m.demonstrations else ""
    return f"{m.success_rate:.0%} of {policy_episodes(m)} (it{m.iteration}){demos}"


def summary_table(rows: Sequence[CurveRow], trained_on: Mapping[int, int],
                  train: Mapping[int, RolloutMetrics]) -> Table:
    """One line a version (the baseline first), two columns a held-out (suite, split): all
    its tasks, and its novel-solution tasks alone."""
    runs = sorted({(r.suite, r.split) for r in rows})
    table = Table(title="held-out success (n, 95 % Wilson interval, McNemar p vs v0); novel: "
                  "tasks whose solution is no train task's")
    table.add_column("version")
    for suite, split in runs:
        table.add_column(f"{suite} {split}: all")
        table.add_column(f"{suite} {split}: novel solution")
    table.add_column("policy's train success")
    table.add_column("rows trained on")
    by_cell = {(r.version, r.suite, r.split): r for r in rows}
    for version in sorted({r.version for r in rows}):
        found = [by_cell.get((version, *run)) for run in runs]
        cells = [cell for c in found
                 for cell in ((heldout_cell(c), novel_cell(c)) if c else ("-", "-"))]
        table.add_row(version_label(version), *cells, train_cell(train.get(version)),
                      str(trained_on[version]) if version in trained_on else "-")
    return table


def p_text(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def versus_control_table(rows: Sequence[VersusControl]) -> Table:
    """The policy's last version against the bank-only control: tasks only one solved."""
    table = Table(title="the policy's own experience against the bank-only control (McNemar, "
                  "tasks only one of the two solved)")
    for col in ("suite split", "versions", "all tasks", "novel solution"):
        table.add_column(col)
    for r in rows:
        table.add_row(f"{r.suite} {r.split}",
                      f"{version_label(r.version)} vs {version_label(r.control)}",
                      f"{r.only_version} vs {r.only_control} of {r.tasks}, {p_text(r.mcnemar_p)}",
                      f"{r.novel_only_version} vs {r.novel_only_control} of {r.novel_tasks}, "
                      f"{p_text(r.novel_mcnemar_p)}")
    return table


def rows_trained_on(model: str, events: Iterable[object]) -> dict[int, int]:
    """Version -> the rows its run trained on, from the runs' finished progress events
    (webgym.training keeps every run) and the published versions (webgym.models is
    compacted by model name: it may hold only the latest); the bank-only control's under its
    evaluation number."""
    control = [e for e in events
               if isinstance(e, ModelVersion) and e.model_name == control_model(model)]
    control_runs = {e.run_id for e in control}
    out = {e.version: e.samples for e in events if isinstance(e, TrainingProgress)
           and e.state == "finished" and e.run_id not in control_runs}
    out |= {e.version: int(e.metrics.get("samples", 0)) for e in events
            if isinstance(e, ModelVersion) and e.model_name == model}
    out |= {CONTROL_EVAL_OFFSET + e.version: int(e.metrics.get("samples", 0)) for e in control}
    return out


async def read_all(settings: Settings, producer: EventProducer, topic: Topic) -> list:
    async with EventConsumer(settings, [topic], None, producer, client_id="summary") as c:
        return [r.event for r in await read_to_end(c)]


async def heldout_report(settings: Settings, producer: EventProducer, versions: Iterable[int],
                         train: Mapping[int, RolloutMetrics], out_dir: Path, console: Console,
                         *, suite: Suite, splits: Sequence[Split], seed: int = 0,
                         per_group: int | None = None) -> list[CurveRow]:
    """Print the report of `versions` (and the baseline, when evaluated) and write its files
    to `out_dir`; `train` maps a version to the metrics of the iteration that ran on it."""
    catalog = await load_task_catalog(settings, producer)
    published = await read_compacted(settings, Topic.EVALUATIONS, producer)
    model = settings.trainer.model_name
    results: list[EvaluationResult] = []
    for version in [BASELINE_EVAL_VERSION, *versions]:
        for s, sp in evaluation_runs(catalog.values(), suite, splits):
            key = evaluation_key(model, version, s, sp, seed, per_group)
            if isinstance(found := published.get(key), EvaluationResult):
                results.append(found)
    if not results:
        return []
    wanted = {eid for r in results for eid in r.episode_ids}
    scored = [e for e in await read_all(settings, producer, Topic.EPISODES_SCORED)
              if isinstance(e, EpisodeScored) and e.episode_id in wanted]
    outcomes: list[TaskOutcome] = [o for r in results
                                   for o in task_outcomes(r, scored, catalog)]
    rows = curve_rows(results, outcomes)
    trained_on = rows_trained_on(model, [*await read_all(settings, producer, Topic.TRAINING),
                                         *await read_all(settings, producer, Topic.MODELS)])
    console.print(summary_table(rows, trained_on, train))
    if against := versus_control(outcomes):
        console.print(versus_control_table(against))
    paths = write_curve(rows, out_dir, outcomes, title=f"{model}: held-out success")
    console.print(f"held-out results: {', '.join(str(p) for p in paths)}", highlight=False)
    return rows
