"""WebGym's per-iteration rollout metrics: their definitions and their files.

Every metric is the policy's alone: demonstrations (teacher-forced episodes, policy_version
"demonstration", webgym_common.versions) follow the task's reference actions, so their success
is the teacher's; they are counted apart, as `demonstrations` and `demonstration_success_rate`.
`episodes` counts every judged episode, demonstrations included; the policy's own are
`policy_episodes(m)` = episodes - demonstrations (derived, not stored, so records written
before demonstrations were counted apart read right: they have 0 demonstrations and counted
every episode as the policy's; the fold below republishes them with the right numbers).

Over the policy's episodes: crashed_rate over all of them, blocked_rate over the non-crashed
ones, and success_rate, avg_steps, avg_chars_per_response and goback_rate over those that
neither crashed nor were blocked. goback_rate pools the iteration: GoBack actions / steps;
avg_chars_per_response is the mean length of the trajectory entries' raw_response.
demonstration_success_rate is over the demonstrations that neither crashed nor were blocked.
An episode id counts once (first record wins). A score the judge could not give
(webgym_common.history.is_judged) is no episode here.

`MetricsFold` keeps them correct as the log grows: it folds scored episodes,
iteration closes and the published metrics, and names every closed iteration whose
numbers differ from what webgym.metrics holds: after a close, after a late score,
or after someone published other numbers (a controller that computed them from
the scores it had seen). The metrics process publishes those; `webgym rollout`
without a metrics process does the same at each close (`recompute_metrics`), so
partial numbers it published earlier are corrected too.

The record is the compacted webgym.metrics (key: iteration); the CSV (one row per
iteration) and the PNG plot beside it are rewritten from that whole table. Both the
metrics processor and `webgym rollout` (when no metrics processor runs) write them.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from rich.console import Console
from rich.table import Table

from webgym_common.agent.actions import parse_action
from webgym_common.config import Settings
from webgym_common.events import EpisodeScored, Event, IterationClosed, RolloutMetrics
from webgym_common.history import is_judged, is_success
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import batches_to_end, read_compacted
from webgym_common.topics import Topic
from webgym_common.versions import is_demonstration_version

METRICS = ("crashed_rate", "blocked_rate", "success_rate", "avg_steps",
           "avg_chars_per_response", "goback_rate")
DEMONSTRATION_COLUMNS = ("policy_episodes", "demonstrations", "demonstration_success_rate")
# The new columns go last: a reader that picks columns by position still finds the old ones.
CSV_COLUMNS = ("iteration", "split", "episodes", *METRICS, "evaluator_version",
               *DEMONSTRATION_COLUMNS)


@dataclass(frozen=True)
class EpisodeSummary:
    """What the metrics need of one episode (the process keeps these, not trajectories)."""

    episode_id: str
    split: str
    crashed: bool
    blocked: bool
    success: bool
    steps: int
    responses: int
    response_chars: int
    gobacks: int
    evaluator_version: str
    demonstration: bool = False  # teacher-forced: counted apart, never the policy's success


def summarize(e: EpisodeScored) -> EpisodeSummary:
    return EpisodeSummary(
        episode_id=e.episode_id, split=e.split, crashed=e.crashed, blocked=e.is_blocked,
        success=is_success(e.reward), steps=e.steps, responses=len(e.trajectory),
        response_chars=sum(len(s.raw_response) for s in e.trajectory),
        gobacks=sum(parse_action(s.action_string).kind == "GoBack" for s in e.trajectory),
        evaluator_version=e.evaluator_version,
        demonstration=is_demonstration_version(e.policy_version),
    )


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _valid(eps: list[EpisodeSummary]) -> list[EpisodeSummary]:
    return [e for e in eps if not e.crashed and not e.blocked]


def metrics_from(iteration: int, split: str, eps: list[EpisodeSummary]) -> RolloutMetrics:
    """The iteration's metrics: every rate over the policy's own episodes, the
    demonstrations counted apart."""
    demos = [e for e in eps if e.demonstration]
    own = [e for e in eps if not e.demonstration]
    ok = [e for e in own if not e.crashed]
    valid = _valid(own)
    steps = sum(e.steps for e in valid)
    demos_valid = _valid(demos)
    return RolloutMetrics(
        iteration=iteration, split=split, episodes=len(eps),
        crashed_rate=_ratio(len(own) - len(ok), len(own)),
        blocked_rate=_ratio(sum(e.blocked for e in ok), len(ok)),
        success_rate=_ratio(sum(e.success for e in valid), len(valid)),
        avg_steps=_ratio(steps, len(valid)),
        avg_chars_per_response=_ratio(sum(e.response_chars for e in valid),
                                      sum(e.responses for e in valid)),
        goback_rate=_ratio(sum(e.gobacks for e in valid), steps),
        evaluator_version=",".join(sorted({e.evaluator_version for e in eps})),
        demonstrations=len(demos),
        demonstration_success_rate=_ratio(sum(e.success for e in demos_valid), len(demos_valid)),
    )


def policy_episodes(m: RolloutMetrics) -> int:
    """The policy's own episodes: the ones every rate but demonstration_success_rate is over."""
    return m.episodes - m.demonstrations


def column(m: RolloutMetrics, name: str) -> int | float | str:
    """A CSV, table or TensorBoard column's value (policy_episodes is derived, the rest are
    fields)."""
    return policy_episodes(m) if name == "policy_episodes" else getattr(m, name)


def compute_metrics(iteration: int, split: str, scored: list[EpisodeScored]) -> RolloutMetrics:
    """Metrics of one iteration and split; other iterations' episodes and repeats are ignored."""
    first: dict[str, EpisodeSummary] = {}
    for e in scored:
        if (e.iteration == iteration and e.split == split and e.episode_id not in first
                and is_judged(e)):
            first[e.episode_id] = summarize(e)
    return metrics_from(iteration, split, list(first.values()))


def same_numbers(a: RolloutMetrics, b: RolloutMetrics | None) -> bool:
    skip = {"event_id", "produced_at"}
    return b is not None and a.model_dump(exclude=skip) == b.model_dump(exclude=skip)


@dataclass
class MetricsFold:
    """Episodes per iteration, the closed iterations and the published metrics table."""

    table: dict[int, RolloutMetrics] = field(default_factory=dict)  # webgym.metrics
    episodes: dict[int, dict[str, EpisodeSummary]] = field(default_factory=dict)
    closed: dict[int, IterationClosed] = field(default_factory=dict)
    dirty: set[int] = field(default_factory=set)

    def fold(self, events: Iterable[Event]) -> None:
        for e in events:
            if isinstance(e, EpisodeScored) and is_judged(e):
                seen = self.episodes.setdefault(e.iteration, {})
                if e.episode_id not in seen:
                    seen[e.episode_id] = summarize(e)
                    self.dirty.add(e.iteration)
            elif isinstance(e, IterationClosed):
                self.closed[e.iteration] = e
                self.dirty.add(e.iteration)
            elif isinstance(e, RolloutMetrics):  # published numbers: are they still right?
                self.table[e.iteration] = e
                self.dirty.add(e.iteration)

    def changed(self) -> list[RolloutMetrics]:
        """Metrics of the closed iterations touched since the last call whose numbers differ
        from the table's (the ones to publish)."""
        ready = sorted(self.dirty & self.closed.keys())
        self.dirty -= set(ready)
        out = []
        for it in ready:
            split = self.closed[it].split
            m = metrics_from(it, split, [e for e in self.episodes.get(it, {}).values()
                                         if e.split == split])
            if not same_numbers(m, self.table.get(it)):
                out.append(m)
        return out


async def recompute_metrics(settings: Settings, producer: EventProducer,
                            csv_path: Path) -> dict[int, RolloutMetrics]:
    """Every closed iteration's metrics from the log as it is now; publishes (and writes the
    files of) those that differ from webgym.metrics. Returns the corrected table."""
    fold = MetricsFold()
    topics = [Topic.METRICS, Topic.EPISODES_SCORED, Topic.CONTROL]
    async with EventConsumer(settings, topics, None, producer, client_id="metrics-fold") as c:
        async for batch in batches_to_end(c, stall_timeout_s=120):
            fold.fold(r.event for r in batch)
    await publish_changed(fold, producer, csv_path)
    return fold.table


async def publish_changed(fold: MetricsFold, producer: EventProducer,
                          csv_path: Path) -> list[RolloutMetrics]:
    """Publish the closed iterations whose numbers changed, then rewrite the files: the topic
    is the record and the files follow it. Returns what was published."""
    changed = fold.changed()
    for m in changed:
        await producer.publish(Topic.METRICS, str(m.iteration), m)
        fold.table[m.iteration] = m
    if changed:
        write_outputs(fold.table, csv_path)
    return changed


async def load_metrics_table(
    settings: Settings, producer: EventProducer
) -> dict[int, RolloutMetrics]:
    """iteration -> latest RolloutMetrics on webgym.metrics."""
    table = await read_compacted(settings, Topic.METRICS, producer)
    return {int(k): v for k, v in table.items() if isinstance(v, RolloutMetrics)}


# -- the files ------------------------------------------------------------------------


def default_csv_path(settings: Settings) -> Path:
    return Path(settings.infra.data_dir) / "metrics" / "metrics.csv"


def write_outputs(table: dict[int, RolloutMetrics], csv_path: Path) -> None:
    """Rewrite the PNG (beside the CSV) and then the CSV from the whole table, atomically.

    The CSV goes last, so a reader that sees a row also finds the plot that shows it.
    """
    rows = [table[it] for it in sorted(table)]
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    plot_metrics(rows, csv_path.with_suffix(".png"))
    tmp = csv_path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for m in rows:
            writer.writerow([column(m, c) for c in CSV_COLUMNS])
    os.replace(tmp, csv_path)


def iteration_axis(ax: Axes, iterations: list[int]) -> None:
    integer_axis(ax, iterations, "iteration")


def integer_axis(ax: Axes, values: list[int], label: str) -> None:
    """Integer ticks (iterations, versions), half a unit of room each side: one point reads
    as 0, not as ticks from -0.045 to 0.045."""
    ax.set_xlabel(label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    if values:
        ax.set_xlim(min(values) - 0.5, max(values) + 0.5)


def demonstration_points(rows: list[RolloutMetrics]) -> tuple[list[int], list[float]]:
    """The demonstrations' success per iteration, only where there were demonstrations (an
    iteration without them has no such rate, not a rate of 0)."""
    shown = [m for m in rows if m.demonstrations]
    return [m.iteration for m in shown], [m.demonstration_success_rate for m in shown]


def metrics_figure(rows: list[RolloutMetrics]) -> Figure:
    """The six metrics, one panel each; success_rate is the policy's (solid), the
    demonstrations' rate is dotted beside it and counted nowhere."""
    fig = Figure(figsize=(12, 6.5), layout="constrained")
    FigureCanvasAgg(fig)  # the Agg renderer, explicitly: no display, no global pyplot state
    its = [m.iteration for m in rows]
    for i, (name, ax) in enumerate(zip(METRICS, fig.subplots(2, 3).flat, strict=True)):
        ax.plot(its, [getattr(m, name) for m in rows], marker="o", color=f"C{i}",
                label="policy")
        if name == "success_rate":
            ax.set_title("success_rate (the policy's own)")
            demo_its, demo_rates = demonstration_points(rows)
            if demo_its:
                ax.plot(demo_its, demo_rates, linestyle=":", marker="x", color="grey",
                        label="demonstrations (not counted)")
                ax.legend(fontsize="small")
        else:
            ax.set_title(name)
        if name.endswith("_rate"):
            ax.set_ylim(-0.05, 1.05)  # a share: the whole range, so a flat line reads as one
        iteration_axis(ax, its)
        ax.grid(alpha=0.3)
    fig.suptitle("WebGym rollout metrics (the policy's episodes; demonstrations apart)")
    return fig


def plot_metrics(rows: list[RolloutMetrics], png_path: Path) -> None:
    fig = metrics_figure(rows)
    tmp = png_path.with_suffix(".png.tmp")
    fig.savefig(tmp, format="png", dpi=80)
    os.replace(tmp, png_path)


def print_metrics(
    metrics: RolloutMetrics | Iterable[RolloutMetrics], console: Console | None = None
) -> None:
    rows = [metrics] if isinstance(metrics, RolloutMetrics) else list(metrics)
    table = Table(title="rollout metrics (every rate the policy's own; demonstrations apart)")
    # Short headers for the new columns: the table still fits a 160-column log.
    headers = {"policy_episodes": "policy", "demonstrations": "demos",
               "demonstration_success_rate": "demos\nsolved"}
    cols = ("iteration", "split", "episodes", "policy_episodes", "demonstrations", *METRICS,
            "demonstration_success_rate")
    for col in cols:
        table.add_column(headers.get(col, col), justify="right")
    for m in rows:
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v)
                 for v in (column(m, c) for c in cols)]
        if not m.demonstrations:  # no demonstrations: no rate of theirs, not a rate of 0
            cells[-1] = "-"
        table.add_row(*cells)
    if console is None:
        console = Console()
        if not console.is_terminal:  # a worker's log: don't squeeze the headers to 80 columns
            console.width = 160
    console.print(table)
