"""The metrics shown: the six-panel figure (PNG, Agg, no global pyplot state), the integer
axes other plots share, and the terminal table."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from rich.console import Console
from rich.table import Table

from webgym_common.events import RolloutMetrics
from webgym_common.metrics.fold import METRICS, column


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
