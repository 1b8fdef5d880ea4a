"""WebGym's per-iteration rollout metrics, from scored episodes.

crashed_rate is over all episodes, blocked_rate over the non-crashed ones, and
success_rate, avg_steps, avg_chars_per_response and goback_rate over the
episodes that neither crashed nor were blocked. goback_rate pools the iteration:
GoBack actions / steps; avg_chars_per_response is the mean length of the
trajectory entries' raw_response. An episode id counts once (first record wins).

The process reads webgym.episodes.scored and webgym.control from the beginning
without a group: its state is the log itself, rebuilt on every start. When an
iteration is closed (IterationClosed), or a late-scored episode of a closed
iteration arrives, it publishes RolloutMetrics to the compacted webgym.metrics
(key: iteration) unless the topic already holds the same numbers, then rewrites
the CSV (one row per iteration) and the PNG plot from the whole table.
"""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from rich.console import Console
from rich.table import Table

from processors.history import is_success
from webgym_common.actions import parse_action
from webgym_common.bus import EventConsumer, EventProducer, Received, batches_to_end, read_compacted
from webgym_common.config import Settings
from webgym_common.events import EpisodeScored, IterationClosed, RolloutMetrics
from webgym_common.lifecycle import run_until_signalled
from webgym_common.topics import Topic

log = logging.getLogger(__name__)
METRICS = ("crashed_rate", "blocked_rate", "success_rate", "avg_steps",
           "avg_chars_per_response", "goback_rate")
CSV_COLUMNS = ("iteration", "split", "episodes", *METRICS, "evaluator_version")


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


def summarize(e: EpisodeScored) -> EpisodeSummary:
    return EpisodeSummary(
        episode_id=e.episode_id, split=e.split, crashed=e.crashed, blocked=e.is_blocked,
        success=is_success(e.reward), steps=e.steps, responses=len(e.trajectory),
        response_chars=sum(len(s.raw_response) for s in e.trajectory),
        gobacks=sum(parse_action(s.action_string).kind == "GoBack" for s in e.trajectory),
        evaluator_version=e.evaluator_version,
    )


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def metrics_from(iteration: int, split: str, eps: list[EpisodeSummary]) -> RolloutMetrics:
    ok = [e for e in eps if not e.crashed]
    valid = [e for e in ok if not e.blocked]
    steps = sum(e.steps for e in valid)
    return RolloutMetrics(
        iteration=iteration, split=split, episodes=len(eps),
        crashed_rate=_ratio(len(eps) - len(ok), len(eps)),
        blocked_rate=_ratio(sum(e.blocked for e in ok), len(ok)),
        success_rate=_ratio(sum(e.success for e in valid), len(valid)),
        avg_steps=_ratio(steps, len(valid)),
        avg_chars_per_response=_ratio(sum(e.response_chars for e in valid),
                                      sum(e.responses for e in valid)),
        goback_rate=_ratio(sum(e.gobacks for e in valid), steps),
        evaluator_version=",".join(sorted({e.evaluator_version for e in eps})),
    )


def compute_metrics(iteration: int, split: str, scored: list[EpisodeScored]) -> RolloutMetrics:
    """Metrics of one iteration and split; other iterations' episodes and repeats are ignored."""
    first: dict[str, EpisodeSummary] = {}
    for e in scored:
        if e.iteration == iteration and e.split == split and e.episode_id not in first:
            first[e.episode_id] = summarize(e)
    return metrics_from(iteration, split, list(first.values()))


def same_numbers(a: RolloutMetrics, b: RolloutMetrics | None) -> bool:
    skip = {"event_id", "produced_at"}
    return b is not None and a.model_dump(exclude=skip) == b.model_dump(exclude=skip)


# -- the process ----------------------------------------------------------------------


class MetricsState:
    """Episodes per iteration and which iterations are closed, folded from the two topics."""

    def __init__(self) -> None:
        self.episodes: dict[int, dict[str, EpisodeSummary]] = {}
        self.closed: dict[int, IterationClosed] = {}
        self.dirty: set[int] = set()

    def fold(self, batch: list[Received]) -> None:
        for r in batch:
            e = r.event
            if isinstance(e, EpisodeScored):
                seen = self.episodes.setdefault(e.iteration, {})
                if e.episode_id not in seen:
                    seen[e.episode_id] = summarize(e)
                    self.dirty.add(e.iteration)
            elif isinstance(e, IterationClosed):
                self.closed[e.iteration] = e
                self.dirty.add(e.iteration)

    def take_ready(self) -> list[RolloutMetrics]:
        """Metrics of closed iterations that changed since the last call."""
        ready = sorted(self.dirty & self.closed.keys())
        self.dirty -= set(ready)
        out = []
        for it in ready:
            split = self.closed[it].split
            eps = [e for e in self.episodes.get(it, {}).values() if e.split == split]
            out.append(metrics_from(it, split, eps))
        return out


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
            writer.writerow([getattr(m, c) for c in CSV_COLUMNS])
    os.replace(tmp, csv_path)


def plot_metrics(rows: list[RolloutMetrics], png_path: Path) -> None:
    fig = Figure(figsize=(12, 6.5), layout="constrained")
    FigureCanvasAgg(fig)  # the Agg renderer, explicitly: no display, no global pyplot state
    its = [m.iteration for m in rows]
    for i, (name, ax) in enumerate(zip(METRICS, fig.subplots(2, 3).flat, strict=True)):
        ax.plot(its, [getattr(m, name) for m in rows], marker="o", color=f"C{i}")
        ax.set_title(name)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    fig.suptitle("WebGym rollout metrics")
    tmp = png_path.with_suffix(".png.tmp")
    fig.savefig(tmp, format="png", dpi=80)
    os.replace(tmp, png_path)


def print_metrics(
    metrics: RolloutMetrics | Iterable[RolloutMetrics], console: Console | None = None
) -> None:
    rows = [metrics] if isinstance(metrics, RolloutMetrics) else list(metrics)
    table = Table(title="rollout metrics")
    for col in ("iteration", "split", "episodes", *METRICS):
        table.add_column(col, justify="right")
    for m in rows:
        table.add_row(str(m.iteration), m.split, str(m.episodes),
                      *(f"{getattr(m, c):.3f}" for c in METRICS))
    if console is None:
        console = Console()
        if not console.is_terminal:  # a worker's log: don't squeeze the headers to 80 columns
            console.width = 160
    console.print(table)


async def follow_iterations(settings: Settings, csv_path: Path) -> None:
    async with EventProducer(settings, client_id="metrics") as producer:
        table: dict[int, RolloutMetrics] = {
            int(k): v for k, v in (await read_compacted(settings, Topic.METRICS, producer)).items()
            if isinstance(v, RolloutMetrics)
        }
        if table:  # a crash between publish and write left the files behind the topic
            write_outputs(table, csv_path)
        state = MetricsState()
        consumer = EventConsumer(settings, [Topic.EPISODES_SCORED, Topic.CONTROL], None,
                                 producer, client_id="metrics")
        async with consumer:
            while True:
                # consume: wait for anything new, then catch up with both topics, so an
                # IterationClosed is judged with the episodes scored before it
                fresh = await consumer.poll(timeout_ms=500)
                if not fresh:
                    continue
                state.fold(fresh)
                async for batch in batches_to_end(consumer, stall_timeout_s=120):
                    state.fold(batch)
                # decide: only closed iterations whose numbers differ from the topic's
                changed = [m for m in state.take_ready()
                           if not same_numbers(m, table.get(m.iteration))]
                # publish, then the files (the topic is the record; files follow it)
                for m in changed:
                    await producer.publish(Topic.METRICS, str(m.iteration), m)
                    table[m.iteration] = m
                if changed:
                    write_outputs(table, csv_path)
                    print_metrics(changed)
                    log.info("metrics published for iterations %s; %s",
                             [m.iteration for m in changed], csv_path)


async def run_metrics_worker(settings: Settings, csv_path: Path | None = None) -> None:
    """Run until SIGTERM/SIGINT."""
    await run_until_signalled(follow_iterations(settings, csv_path or default_csv_path(settings)))
