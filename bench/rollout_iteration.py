"""Rollout benchmark: one iteration of sandbox tasks through the pipeline vs a naive loop.

  .venv/bin/python -m bench.rollout_iteration [--tasks 64] [--contexts 8]

The pipeline: controller, one browser worker (N contexts), the teacher-forcing policy,
evaluator, history and metrics, all on the embedded stack. The naive loop: one
browser, one task at a time, the same reference actions executed and observed with
the worker's own code, no Kafka, no MinIO. Then both again with a policy that takes
0.5 s per decision (like a model server would).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
import uuid
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from bench.direct import open_observed_page
from bench.machine import describe_machine
from infra import pipeline, stack
from producers.browser.browser_pool import BrowserPool
from producers.browser.execute import ActionFailed, execute
from producers.browser.observe import observe
from producers.catalog import load_tasks
from producers.controller.rollout import run_iteration
from webgym_common.agent.teacher import resolve_reference_action
from webgym_common.config import Settings, get_settings
from webgym_common.events import Task
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer

console = Console()
TASKS_FILE = Path("infra/sandbox/tasks/sandbox_tasks.jsonl")


async def via_pipeline(base: Settings, n: int, contexts: int,
                       delay_s: float) -> tuple[float, int, list[Task], float]:
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    data = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    settings = base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"topic_prefix": prefix}),
        "browser": base.browser.model_copy(update={"contexts": contexts}),
        "policy": base.policy.model_copy(update={"kind": "teacher", "teacher_delay_s": delay_s,
                                                 "max_inflight": 2 * contexts}),
        "rollout": base.rollout.model_copy(update={"strategy": "uniform", "seed": 1,
                                                   "completion_threshold": 1.0}),
        # Pipeline processes keep their pid files and logs apart from the stack's.
        "infra": base.infra.model_copy(update={"data_dir": data}),
    })
    await create_topics(settings)
    try:
        await pipeline.up(settings)
        async with EventProducer(settings, client_id="bench") as producer:
            await load_tasks(TASKS_FILE, producer)
            started = time.perf_counter()
            state, closed = await run_iteration(settings, producer, 0, "train", n)
            wall = time.perf_counter() - started
        steps = sum(c.steps for c in state.completed.values())
        tasks = [r.task for r in state.requests.values()]
        solved = sum(s.reward for s in state.scored.values()) / max(1, len(state.scored))
        return wall, steps, tasks, solved
    finally:
        pipeline.down(settings)


async def naive(settings: Settings, tasks: list[Task], delay_s: float) -> tuple[float, int]:
    cfg = settings.browser
    pool = BrowserPool(cfg, lambda reason: None)
    await pool.start()
    steps = 0
    started = time.perf_counter()
    try:
        for task in tasks:
            session, context, obs = await open_observed_page(
                pool, cfg, settings.resolve_url(task.website))
            for ref in task.reference_actions:
                await asyncio.sleep(delay_s)
                action = resolve_reference_action(ref, obs.marks)
                if action.kind == "ANSWER":
                    break
                session.marks = {m.index: m for m in obs.marks}
                with contextlib.suppress(ActionFailed):  # reported, as the worker would
                    await execute(session, action, cfg)
                obs = await observe(session.page, session.cdp, cfg)
                steps += 1
            await context.close()
    finally:
        await pool.stop()
    return time.perf_counter() - started, steps


def main(tasks: int = 64, contexts: int = 8) -> None:
    console.print(describe_machine())
    settings = get_settings()
    asyncio.run(stack.up(settings))
    table = Table(title=f"one rollout iteration of {tasks} sandbox tasks (teacher forcing)")
    for col in ("policy latency", "pipeline wall s", "steps", "steps/s", "success",
                "naive wall s", "steps/s", "speedup"):
        table.add_column(col, justify="right")
    for delay in (0.0, 0.5):
        console.print(f"pipeline, {delay:.1f} s per decision ...")
        wall, steps, sampled, success = asyncio.run(via_pipeline(settings, tasks, contexts,
                                                                 delay))
        console.print(f"naive loop, {delay:.1f} s per decision ...")
        n_wall, n_steps = asyncio.run(naive(settings, sampled, delay))
        table.add_row(f"{delay:.1f} s", f"{wall:.1f}", str(steps), f"{steps / wall:.2f}",
                      f"{success:.2f}", f"{n_wall:.1f}", f"{n_steps / n_wall:.2f}",
                      f"{n_wall / wall:.2f}x")
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
