"""The metrics page's plots, drawn on the server as PNG (matplotlib's Agg, no pyplot state).

Pure: data in, bytes out. The app draws them in a worker thread, so a plot never holds the
event loop.
"""

from __future__ import annotations

import io
from collections import defaultdict

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from webgym_common.events import EvaluationResult, RolloutMetrics
from webgym_common.metrics.fold import METRICS
from webgym_common.metrics.plots import demonstration_points, integer_axis, iteration_axis


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def _empty(ax: object, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} yet", ha="center", va="center",  # type: ignore[attr-defined]
            transform=ax.transAxes, color="grey")  # type: ignore[attr-defined]


def metrics_png(rows: list[RolloutMetrics]) -> bytes:
    """WebGym's six rollout metrics per iteration, one panel each, a line per split: the
    policy's own episodes; the demonstrations' success dotted beside success_rate."""
    fig = Figure(figsize=(12, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    by_split: dict[str, list[RolloutMetrics]] = defaultdict(list)
    for m in sorted(rows, key=lambda m: m.iteration):
        by_split[m.split].append(m)
    for name, ax in zip(METRICS, fig.subplots(2, 3).flat, strict=True):
        lines = 0
        for i, (split, ms) in enumerate(sorted(by_split.items())):
            ax.plot([m.iteration for m in ms], [getattr(m, name) for m in ms], marker="o",
                    color=f"C{i}", label=split)
            lines += 1
            demo_its, demo_rates = demonstration_points(ms)
            if name == "success_rate" and demo_its:
                ax.plot(demo_its, demo_rates, linestyle=":", marker="x", color=f"C{i}",
                        label=f"{split} demonstrations (not counted)")
                lines += 1
        if not rows:
            _empty(ax, "metrics")
        elif lines > 1:
            ax.legend(fontsize="small")
        ax.set_title("success_rate (the policy's own)" if name == "success_rate" else name)
        iteration_axis(ax, [m.iteration for m in rows])
        if name.endswith("_rate"):
            ax.set_ylim(-0.05, 1.05)  # a share: the whole range, so a flat line reads as one
        ax.grid(alpha=0.3)
    fig.suptitle("rollout metrics per iteration (the policy's episodes; demonstrations apart)")
    return _png(fig)


def learning_curve_png(results: list[EvaluationResult]) -> bytes:
    """Held-out success per model version with 95 % Wilson intervals, a line per suite/split."""
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    curves: dict[str, list[EvaluationResult]] = defaultdict(list)
    for r in sorted(results, key=lambda r: r.version):
        if r.version < 0:  # the scripted baseline (version -1): a level, not a version
            ax.axhline(r.success_rate, linestyle="--", color="grey", linewidth=1)
            ax.annotate(f"baseline {r.suite}/{r.split}", (0, r.success_rate),
                        fontsize="x-small", color="grey", va="bottom")
            continue
        curves[f"{r.model_name} {r.suite}/{r.split} s{r.seed}"].append(r)
    for label, rs in sorted(curves.items()):
        xs, ys = [r.version for r in rs], [r.success_rate for r in rs]
        err = [[y - r.ci_low for y, r in zip(ys, rs, strict=True)],
               [r.ci_high - y for y, r in zip(ys, rs, strict=True)]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=4, label=label)
    if curves:
        ax.legend(fontsize="small")
    else:
        _empty(ax, "evaluations")
    ax.set_ylim(-0.05, 1.05)
    integer_axis(ax, [r.version for r in results if r.version >= 0], "model version")
    ax.set_ylabel("success rate (95 % CI)")
    ax.set_title("learning curve: held-out evaluation per version")
    ax.grid(alpha=0.3)
    return _png(fig)


def losses_png(losses: dict[str, dict[int, float]], versions: dict[str, int]) -> bytes:
    """Training loss per step, a line per run (labelled with the version it makes)."""
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for run, points in sorted(losses.items(), key=lambda kv: versions.get(kv[0], 0)):
        steps = sorted(points)
        ax.plot(steps, [points[s] for s in steps], marker=".",
                label=f"v{versions.get(run, '?')} ({run[:8]})")
    if losses:
        ax.legend(fontsize="small")
    else:
        _empty(ax, "training runs")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("training loss per run")
    ax.grid(alpha=0.3)
    return _png(fig)
