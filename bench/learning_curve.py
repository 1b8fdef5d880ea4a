"""The learning curve: success on held-out tasks per model version, the whole loop on the CPU.

  .venv/bin/python -m bench.learning_curve [--iterations 3] [--tasks 8] [--demos 16]
      [--eval-limit 10] [--eval-max-steps 6] [--episode-minutes 3] [--train-steps 16]
      [--temperature 1.0] [--suite all|sandbox|miniwob] [--out docs]

On the embedded stack with vLLM (SmolLM2-135M) and its own topics: the generated sandbox
tasks and MiniWoB++ (or only `--suite`'s) are loaded with their splits; the pipeline runs
(browser worker, vLLM policy, evaluator, replay, trainer with LLaMA-Factory LoRA runs, model
loader); the loop runs `--iterations` synchronous training iterations on the train split,
the first seeded with `--demos` teacher-forced episodes, and evaluates version 0 (the base
model) and every trained version on the test (held-out entities / seeds) and ood (held-out
templates / environments) splits of both suites, each on the same seeded draw of
`--eval-limit` tasks at the evaluation temperature. Writes learning_curve.csv and
learning_curve.png (success per version with 95 % Wilson intervals, one line per suite and
split) and prints the table.
"""

from __future__ import annotations

import asyncio
import csv
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import typer
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bench.machine import describe_machine
from infra import pipeline, stack, trainer_env
from producers.catalog import load_tasks
from producers.controller.evaluate import evaluate_version, print_results
from producers.controller.rollout import wait_for_version
from producers.controller.run import rollout
from webgym_cli.common import console  # 160 columns when piped to a log
from webgym_common.admin import create_topics
from webgym_common.bus import EventProducer
from webgym_common.config import PolicyKind, SamplingStrategy, Settings, Split, Suite, get_settings
from webgym_common.events import EvaluationResult
from webgym_common.readers import read_compacted
from webgym_common.topics import Topic

TASK_FILES = {Suite.SANDBOX: Path("infra/sandbox/tasks/generated_tasks.jsonl"),
              Suite.MINIWOB: Path("infra/sandbox/tasks/miniwob_tasks.jsonl")}
COLUMNS = ("version", "suite", "split", "episodes", "successes", "success_rate", "ci_low",
           "ci_high", "avg_steps", "wall_time_s")


def curve_settings(base: Settings, *, demos: int, eval_limit: int, eval_max_steps: int,
                   episode_minutes: float, train_steps: int, temperature: float) -> Settings:
    prefix = f"bcurve{uuid.uuid4().hex[:6]}"
    return base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"topic_prefix": prefix}),
        "infra": base.infra.model_copy(update={
            "data_dir": Path(tempfile.mkdtemp(prefix="bench-curve-"))}),
        # Rollouts explore at WebGym's temperature; evaluations decide at eval_temperature (0).
        "policy": base.policy.model_copy(update={"kind": PolicyKind.VLLM,
                                                 "temperature": temperature}),
        "rollout": base.rollout.model_copy(update={
            "train": True, "demonstrations": demos, "demonstration_share": 0.25, "seed": 5,
            "strategy": SamplingStrategy.UNIFORM, "task_timeout_minutes": episode_minutes,
            "grace_period_s": 20.0, "cancel_wait_s": 20.0, "eval_every": 1,
            "eval_limit": eval_limit, "eval_max_steps": eval_max_steps}),
        # Versions under names of their own: the bench shares the stack's vLLM with others.
        "trainer": base.trainer.model_copy(update={
            "max_staleness": 0, "max_steps": train_steps, "model_name": f"{prefix}-policy"}),
    })


def write_csv(results: Sequence[EvaluationResult], path: Path) -> None:
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(COLUMNS)
        for r in results:
            out.writerow([getattr(r, c) for c in COLUMNS])


def plot_curve(results: Sequence[EvaluationResult], path: Path, title: str) -> None:
    fig = Figure(figsize=(8, 5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    lines = sorted({(r.suite, r.split) for r in results})
    for i, (suite, split) in enumerate(lines):
        rows = sorted((r for r in results if (r.suite, r.split) == (suite, split)),
                      key=lambda r: r.version)
        x = [r.version + (i - (len(lines) - 1) / 2) * 0.05 for r in rows]  # apart, not hidden
        y = [r.success_rate for r in rows]
        err = [[r.success_rate - r.ci_low for r in rows], [r.ci_high - r.success_rate
                                                           for r in rows]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=4,
                    label=f"{suite} {split} (n={rows[0].episodes})")
    ax.set_xlabel("model version (0: base model)")
    ax.set_ylabel("success rate (95 % Wilson interval)")
    ax.set_xticks(sorted({r.version for r in results}))
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend()
    fig.savefig(path, format="png", dpi=90)


async def run_curve(settings: Settings, iterations: int, tasks: int, suite: Suite,
                    ) -> list[EvaluationResult]:
    await create_topics(settings)
    try:
        await pipeline.up(settings, timeout_s=300)
        async with EventProducer(settings, client_id="bench") as producer:
            # only the suite's tasks are loaded: training draws and evaluations stay in it
            for path in (p for s, p in TASK_FILES.items() if suite in (s, Suite.ALL)):
                report = await load_tasks(path, producer)
                console.print(f"loaded {path}: {len(report.loaded)} tasks, {len(report.bad)} bad")
        # versions 0 .. iterations - 1 are evaluated before the iteration that runs on them
        await rollout(settings, "train", tasks, iterations, console)
        async with EventProducer(settings, client_id="bench") as producer:
            with console.status(f"waiting for v{iterations}") as status:
                await wait_for_version(settings, producer, iterations, status.update)
            await evaluate_version(settings, producer, iterations, Suite.ALL,
                                   [Split.TEST, Split.OOD], console,
                                   limit=settings.rollout.eval_limit,
                                   max_steps=settings.rollout.eval_max_steps,
                                   skip_published=True)
            table = await read_compacted(settings, Topic.EVALUATIONS, producer)
        return sorted((e for e in table.values() if isinstance(e, EvaluationResult)),
                      key=lambda r: (r.suite, r.split, r.version))
    finally:
        pipeline.down(settings)


def main(iterations: int = 3, tasks: int = 8, demos: int = 16, eval_limit: int = 10,
         eval_max_steps: int = 6, episode_minutes: float = 3.0, train_steps: int = 16,
         temperature: float = 1.0, suite: Suite = Suite.ALL, out: Path = Path("docs")) -> None:
    console.print(describe_machine())
    base = get_settings()
    trainer_env.prepare(base)
    asyncio.run(stack.up(base, with_vllm=True))
    settings = curve_settings(base, demos=demos, eval_limit=eval_limit,
                              eval_max_steps=eval_max_steps, episode_minutes=episode_minutes,
                              train_steps=train_steps, temperature=temperature)
    started = time.perf_counter()
    results = asyncio.run(run_curve(settings, iterations, tasks, suite))
    wall = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    write_csv(results, out / "learning_curve.csv")
    title = (f"SmolLM2-135M + LoRA: {iterations} iterations x {tasks} episodes (+{demos} demos),\n"
             f"{train_steps}-step LoRA runs, {eval_limit} tasks per suite and split")
    plot_curve(results, out / "learning_curve.png", title)
    print_results(results, console)
    console.print(f"{len(results)} evaluations in {wall / 60:.1f} min; "
                  f"{out / 'learning_curve.csv'}, {out / 'learning_curve.png'}")


if __name__ == "__main__":
    typer.run(main)
