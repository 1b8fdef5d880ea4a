"""`webgym rollout`: K iterations with a live progress bar, metrics printed at each close.

The metrics are the metrics process's. Without one, each close recomputes every closed
iteration's metrics from the log (webgym_common.metrics.recompute_metrics): scores
that came after an iteration closed correct its numbers at the next close, never
left as they were when it closed.
"""

from __future__ import annotations

import asyncio

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from producers.controller.evaluate import evaluate_version
from producers.controller.iteration import IterationState, version_needed
from producers.controller.rollout import next_iteration, run_iteration, wait_for_version
from webgym_common.bus import EventConsumer, EventProducer
from webgym_common.config import Settings, Split, Suite
from webgym_common.events import RolloutMetrics
from webgym_common.metrics import default_csv_path, print_metrics, recompute_metrics
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


async def evaluate_periodically(settings: Settings, producer: EventProducer, version: int,
                                console: Console) -> None:
    """Every `rollout.eval_every`-th version on the test and ood splits (once: a resumed
    loop takes the results webgym.evaluations holds)."""
    cfg = settings.rollout
    if not cfg.eval_every or version % cfg.eval_every:
        return
    try:
        await evaluate_version(settings, producer, version, Suite.ALL, [Split.TEST, Split.OOD],
                               console, limit=cfg.eval_limit, max_steps=cfg.eval_max_steps,
                               skip_published=True)
    except ValueError as err:  # no test tasks loaded: the loop trains on regardless
        console.print(f"[yellow]not evaluating v{version}:[/yellow] {err}")


async def rollout(settings: Settings, split: str, tasks_per_iteration: int, iterations: int,
                  console: Console) -> list[RolloutMetrics]:
    results = []
    async with EventProducer(settings, client_id="controller") as producer:
        for _ in range(iterations):
            iteration = await next_iteration(settings, producer, split)
            if settings.rollout.train:
                needed = version_needed(iteration, settings.trainer.max_staleness)
                with console.status(f"it{iteration}: waiting for v{needed}") as status:
                    served = await wait_for_version(settings, producer, needed, status.update)
                console.print(f"iteration {iteration} runs on {settings.trainer.model_name} "
                              f"v{served} (needs v{needed}: max staleness "
                              f"{settings.trainer.max_staleness})")
                await evaluate_periodically(settings, producer, served, console)
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console) as progress:
                bar = progress.add_task(f"it{iteration} {split}", total=tasks_per_iteration)

                def update(state: IterationState, bar: TaskID = bar) -> None:
                    progress.update(bar, completed=len(state.completed),
                                    total=len(state.requests), description=_describe(state))

                state, closed = await run_iteration(settings, producer, iteration, split,
                                                    tasks_per_iteration, update)
            metrics = await wait_for_metrics(settings, producer, iteration)
            if metrics is None:  # no metrics process: recompute from the log, files too
                table = await recompute_metrics(settings, producer, default_csv_path(settings))
                metrics = table[iteration]
            console.print(f"iteration {iteration} closed in {closed.wall_time_s:.0f}s: "
                          f"{closed.completed}/{closed.requested} completed, "
                          f"{closed.crashed} crashed, {closed.blocked} blocked, "
                          f"{closed.cancelled} cancelled, {closed.timed_out} timed out")
            print_metrics(metrics, console)
            results.append(metrics)
    console.print(f"metrics: {default_csv_path(settings)} and "
                  f"{default_csv_path(settings).with_suffix('.png')}")
    return results
