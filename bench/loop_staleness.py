"""The RL loop, synchronous vs asynchronous: wall time of the same iterations with k = 0 and 1.

  .venv/bin/python -m bench.loop_staleness [--iterations 3] [--tasks 8] [--max-steps 4]
      [--episode-minutes 1.5]

Each mode runs on the embedded stack (with vLLM) with its own topics and pipeline processes:
browser worker, vLLM policy, evaluator, replay, trainer (LLaMA-Factory LoRA runs) and model
loader. k = 0 is WebGym's loop (an iteration waits until the version trained on everything
before it is served); k = 1 lets iteration i run on version i - 1 while version i trains
(AReaL / AsyncWebRL), so rollouts and training overlap. Printed: wall time per mode, the
versions each iteration ran on, and the ratio sync / async (> 1: asynchronous is faster).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from harness.machine import describe_machine
from infra import pipeline, stack, trainer_env
from producers.catalog import load_tasks
from producers.controller.run import rollout
from webgym_common.choices import PolicyKind, SamplingStrategy
from webgym_common.config import Settings, get_settings
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer

console = Console()
TASKS_FILE = Path("environments/tasks/sandbox_tasks.jsonl")


def mode_settings(base: Settings, k: int, max_steps: int, episode_minutes: float) -> Settings:
    data = Path(tempfile.mkdtemp(prefix=f"bench-loop-k{k}-"))
    prefix = f"bloop{uuid.uuid4().hex[:6]}"
    return base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"topic_prefix": prefix}),
        "infra": base.infra.model_copy(update={"data_dir": data}),
        "policy": base.policy.model_copy(update={"kind": PolicyKind.VLLM}),
        "rollout": base.rollout.model_copy(update={
            "train": True, "demonstration_share": 0.5, "seed": 11,
            "strategy": SamplingStrategy.UNIFORM,
            # A 135M model rarely answers: cut its episodes, as the loop test does.
            "task_timeout_minutes": episode_minutes, "grace_period_s": 20.0,
            "cancel_wait_s": 20.0}),
        # Each mode's versions under their own served names: both modes share one vLLM, and
        # a served name is never reused (the loader refuses other weights under it).
        "trainer": base.trainer.model_copy(update={
            "max_staleness": k, "max_steps": max_steps, "model_name": f"{prefix}-policy"}),
    })


async def one_mode(settings: Settings, iterations: int, tasks: int) -> float:
    await create_topics(settings)
    try:
        await pipeline.up(settings, timeout_s=300)
        async with EventProducer(settings, client_id="bench") as producer:
            await load_tasks(TASKS_FILE, producer)
        started = time.perf_counter()
        await rollout(settings, "train", tasks, iterations, console)
        return time.perf_counter() - started
    finally:
        pipeline.down(settings)


def main(iterations: int = 3, tasks: int = 8, max_steps: int = 4,
         episode_minutes: float = 1.5) -> None:
    console.print(describe_machine())
    base = get_settings()
    trainer_env.prepare(base)
    asyncio.run(stack.up(base, with_vllm=True))
    walls = {}
    for k in (0, 1):
        console.rule(f"max_staleness {k}")
        walls[k] = asyncio.run(one_mode(mode_settings(base, k, max_steps, episode_minutes),
                                        iterations, tasks))
    table = Table(title=f"{iterations} iterations of {tasks} episodes (cut at "
                        f"{episode_minutes:g} min), LoRA runs of {max_steps} steps")
    for col in ("mode", "wall s", "s / iteration"):
        table.add_column(col, justify="right")
    for k, wall in walls.items():
        table.add_row("sync (k=0)" if k == 0 else f"async (k={k})", f"{wall:.0f}",
                      f"{wall / iterations:.0f}")
    console.print(table)
    console.print(f"sync / async wall time: {walls[0] / walls[1]:.2f}x")


if __name__ == "__main__":
    typer.run(main)
