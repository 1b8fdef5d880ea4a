"""`webgym rollout`: K iterations with a live progress bar, metrics printed at each close.

The metrics are the metrics process's. Without one, each close recomputes every closed
iteration's metrics from the log (webgym_common.metrics.storage.recompute_metrics): scores
that came after an iteration closed correct its numbers at the next close, never
left as they were when it closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from producers.controller.evaluate import BASELINE_EVAL_VERSION, evaluate_version, version_label
from producers.controller.iteration import (
    IterationState,
    is_warm_start_iteration,
    solved_summary,
    version_needed,
)
from producers.controller.rollout import next_iteration, run_iteration, wait_for_version
from producers.controller.summary import heldout_report
from webgym_common.config import Settings
from webgym_common.events import RolloutMetrics
from webgym_common.metrics.plots import print_metrics
from webgym_common.metrics.storage import default_csv_path, recompute_metrics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.topics import Topic

METRICS_WAIT_S = 30.0


def _describe(state: IterationState) -> str:
    t = state.terminations
    return (f"it{state.iteration} {state.split}: requested {len(state.requests)} · "
            f"running {state.running} · done {len(state.completed)} · "
            f"crashed {t['crashed']} · blocked {t['blocked']} · scored {len(state.scored)}")


async def wait_for_metrics(settings: Settings, producer: EventProducer,
                           iteration: int) -> RolloutMetrics | None:
    """The metrics process's numbers for this iteration, if it is running."""
    async with EventConsumer(settings, [Topic.METRICS], None, producer,
                             client_id="rollout-metrics") as c:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + METRICS_WAIT_S
        while loop.time() < deadline:
            for r in await c.poll(300):
                if isinstance(r.event, RolloutMetrics) and r.event.iteration == iteration:
                    return r.event
    return None


def evaluates(settings: Settings, version: int) -> bool:
    every = settings.rollout.eval_every
    return bool(every) and version % every == 0


async def evaluate_once(settings: Settings, producer: EventProducer, version: int,
                        console: Console) -> None:
    """One version (BASELINE_EVAL_VERSION: the scripted baseline) on the loop's held-out set
    (once: a resumed loop takes the results webgym.evaluations holds)."""
    cfg = settings.rollout
    try:
        await evaluate_version(settings, producer, version, cfg.eval_suite,
                               list(cfg.eval_splits), console, limit=cfg.eval_limit,
                               per_group=cfg.eval_per_group, max_steps=cfg.eval_max_steps,
                               skip_published=True)
    except ValueError as err:  # no test tasks loaded: the loop trains on regardless
        console.print(f"[yellow]not evaluating {version_label(version)}:[/yellow] {err}")


async def rollout(settings: Settings, split: str, tasks_per_iteration: int, iterations: int,
                  console: Console, report_dir: Path | None = None) -> list[RolloutMetrics]:
    """`iterations` iterations (after an empty iteration 0 that trains the warm start, with
    `rollout.warm_start_first`); with `rollout.eval_every`, the baseline, every k-th served
    version and the last trained one evaluated on the held-out set, then the report."""
    results = []
    on_version: dict[int, RolloutMetrics] = {}  # the iteration that ran on each version
    async with EventProducer(settings, client_id="controller") as producer:
        if settings.rollout.eval_every and settings.rollout.eval_baseline:
            await evaluate_once(settings, producer, BASELINE_EVAL_VERSION, console)
        served, cfg, policy_iterations = 0, settings.rollout, 0
        train = cfg.train and split == "train"
        while policy_iterations < iterations:
            iteration = await next_iteration(settings, producer, split)
            # The warm start's own iteration requests nothing and is not one of `iterations`.
            warm = is_warm_start_iteration(iteration, train, cfg.warm_start_first)
            n = 0 if warm else tasks_per_iteration
            policy_iterations += not warm
            if settings.rollout.train:
                needed = version_needed(iteration, settings.trainer.max_staleness)
                served = await wait_and_say(settings, producer, needed, console,
                                            f"iteration {iteration} runs on")
                if evaluates(settings, served):
                    await evaluate_once(settings, producer, served, console)
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console) as progress:
                bar = progress.add_task(f"it{iteration} {split}", total=n)

                def update(state: IterationState, bar: TaskID = bar) -> None:
                    progress.update(bar, completed=len(state.completed),
                                    total=len(state.requests), description=_describe(state))

                state, closed = await run_iteration(settings, producer, iteration, split, n,
                                                    update)
            metrics = await wait_for_metrics(settings, producer, iteration)
            if metrics is None:  # no metrics process: recompute from the log, files too
                table = await recompute_metrics(settings, producer, default_csv_path(settings))
                metrics = table[iteration]
            console.print(f"iteration {iteration} closed in {closed.wall_time_s:.0f}s: "
                          f"{closed.completed}/{closed.requested} completed, "
                          f"{closed.crashed} crashed, {closed.blocked} blocked, "
                          f"{closed.cancelled} cancelled, {closed.timed_out} timed out; "
                          f"{solved_summary(state)}")
            print_metrics(metrics, console)
            results.append(metrics)
            if n:  # the warm start's empty iteration says nothing of the version it ran on
                on_version.setdefault(served, metrics)
        if results and settings.rollout.train and not settings.trainer.max_staleness:
            # The synchronous loop's last close makes one more version: wait for it (no run
            # left training behind the summary) and measure it like the others.
            last = version_needed(results[-1].iteration + 1, 0)
            served = await wait_and_say(settings, producer, last, console, "trained:")
            if settings.rollout.eval_every:
                await evaluate_once(settings, producer, served, console)
        if settings.rollout.eval_every:
            await loop_report(settings, producer, evaluated_versions(settings, served),
                              on_version, report_dir, console)
    console.print(f"metrics: {default_csv_path(settings)} and "
                  f"{default_csv_path(settings).with_suffix('.png')}")
    return results


def evaluated_versions(settings: Settings, served: int) -> list[int]:
    """Every version the loop has evaluated up to `served`, this run's or an earlier one's
    (resumed loops)."""
    return [v for v in range(served + 1) if evaluates(settings, v) or v == served]


async def loop_report(settings: Settings, producer: EventProducer, versions: list[int],
                      on_version: Mapping[int, RolloutMetrics], report_dir: Path | None,
                      console: Console) -> None:
    """The held-out report of `versions` on the loop's held-out set (files to `report_dir`,
    default <data_dir>/evaluations)."""
    cfg = settings.rollout
    await heldout_report(settings, producer, versions, on_version,
                         report_dir or settings.infra.data_dir / "evaluations", console,
                         suite=cfg.eval_suite, splits=list(cfg.eval_splits),
                         per_group=cfg.eval_per_group)


async def wait_and_say(settings: Settings, producer: EventProducer, needed: int,
                       console: Console, what: str) -> int:
    with console.status(f"waiting for v{needed}") as status:
        served = await wait_for_version(settings, producer, needed, status.update)
    console.print(f"{what} {settings.trainer.model_name} v{served} (needs v{needed}: max "
                  f"staleness {settings.trainer.max_staleness})")
    return served
