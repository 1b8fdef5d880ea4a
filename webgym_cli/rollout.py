"""`webgym rollout | run | drive | export`: the top-level commands that drive episodes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import Progress
from rich.table import Table

from webgym_cli.common import console, one_line_errors, settings_with
from webgym_common.choices import Driver, PolicyKind, SamplingStrategy, Split, Suite, TrainPool
from webgym_common.config import Settings, TrainerSettings, get_settings
from webgym_common.config.pipeline import SANDBOX_TASKS

if TYPE_CHECKING:
    from producers.controller.main_job import Services

app = typer.Typer()


@app.command("rollout")
@one_line_errors
def rollout_command(
    split: Split = typer.Option(Split.TRAIN, help="Which tasks to sample."),
    tasks_per_iteration: int = typer.Option(32, help="Episodes per iteration."),
    iterations: int = typer.Option(1, help="Iterations to run."),
    strategy: SamplingStrategy | None = typer.Option(
        None, help="Sampling (default: WEBGYM_ROLLOUT__STRATEGY)."),
) -> None:
    """Run rollout iterations on a running pipeline.

    Samples tasks, requests their episodes, follows them with live progress and prints the
    metrics.

    Example: webgym rollout --split train --tasks-per-iteration 16 --iterations 2"""
    from producers.controller.run import rollout

    settings = settings_with(rollout={"strategy": strategy})
    asyncio.run(rollout(settings, split.value, tasks_per_iteration, iterations, console))


@app.command("run")
@one_line_errors
def run(
    policy: PolicyKind = typer.Option(
        PolicyKind.VLLM, help="vllm (SmolLM2 on the CPU, trained by the loop) or teacher."),
    tasks_per_iteration: int = typer.Option(8, help="Episodes per iteration."),
    iterations: int = typer.Option(2, help="Iterations (a training run after each)."),
    train: bool = typer.Option(True, help="Train after each iteration and serve the result."),
    max_staleness: int | None = typer.Option(
        None, help="0: synchronous (WebGym); k > 0: rollouts run up to k versions behind."),
    bank: int = typer.Option(
        510, help="Train tasks whose verified references go into the demonstration bank "
        "before the loop (spread over MiniWoB++ environments; the first LoRA run learns "
        "from it; the default holds the whole bank the leak guard lets train, 336 "
        "tasks); 0: none."),
    demonstrations: float = typer.Option(
        0.0, help="Share of each iteration's episodes run teacher-forced (counted apart, "
        "never in success_rate)."),
    demos: int = typer.Option(
        0, "--demos", help="Teacher-forced episodes added to the first iteration."),
    episode_minutes: float = typer.Option(
        5.0, help="Episodes end (timed out) after this long: a 135M model on the CPU "
        "rarely answers, so its episodes would run to 20-30 steps."),
    train_steps: int = typer.Option(
        96, help="Caps each LoRA run (batch 2); -1: epochs decide."),
    eval_every: int = typer.Option(
        1, help="Evaluate every k-th served version (v0 first) and the last on the "
        "held-out set, with the scripted baseline once; 0: never."),
    eval_per_group: int = typer.Option(
        4, help="Held-out tasks per MiniWoB++ environment (the fixed, stratified set: 88 "
        "test tasks, sized so that a fresh `make run` ends within 35 min on 2 cores; "
        "webgym curve runs 6)."),
    eval_max_steps: int = typer.Option(6, help="Caps each held-out episode's steps."),
    tasks: list[Path] | None = typer.Option(
        None, "--tasks", exists=True, dir_okay=False,
        help="Task files to load (default: WEBGYM_ROLLOUT__TASK_FILES, the sandbox's "
        "hand-written and generated tasks and MiniWoB++)."),
    model: Path | None = typer.Option(
        None, "--model", exists=True, file_okay=False,
        help="A Hugging Face model directory to serve and train instead of SmolLM2-135M "
        "(with WEBGYM_TRAINER__TEMPLATE, its LLaMA-Factory chat template)."),
    monitor: bool = typer.Option(
        True, help="Start `webgym monitor` beside the pipeline (left serving after the run; "
        "`webgym pipeline down` stops it)."),
) -> None:
    """Run everything: the stack, the pipeline and the RL loop.

    Starts the embedded stack, loads the task suites, starts the pipeline, runs the loop and
    exports each iteration. Each iteration: rollouts -> scores -> replay samples -> one LoRA run
    (LLaMA-Factory) -> the new version hot-loaded into vLLM -> the next iteration on it. Before
    the loop, a demonstration bank; around it, the held-out evaluation and its report.

    Example: webgym run --iterations 2 --eval-per-group 1"""
    train = train and policy == PolicyKind.VLLM
    settings = settings_with(policy={"kind": policy},
                             rollout={"train": train, "demonstration_share": demonstrations,
                                      "task_timeout_minutes": episode_minutes,
                                      "eval_every": eval_every,
                                      "eval_per_group": eval_per_group,
                                      "eval_suite": Suite.MINIWOB, "eval_splits": [Split.TEST],
                                      "eval_max_steps": eval_max_steps,
                                      "demonstrations": demos},
                             trainer={"max_staleness": max_staleness, "max_steps": train_steps,
                                      "run_timeout_s": run_timeout_s(train_steps)},
                             vllm={"model": str(model) if model else None})
    _main_job(settings, tasks or list(settings.rollout.task_files), monitor, bank,
              [Suite.MINIWOB], tasks_per_iteration,
              iterations, None)


# A LoRA step took 7-15 s on 2 cores (bf16 / float32, batch 2, cutoff 1024): a curve's long
# warm start (650 steps took 1 h 41 min) must not hit the trainer's default run timeout.
RUN_S_PER_STEP = 30.0
DEFAULT_RUN_TIMEOUT_S: float = TrainerSettings.model_fields["run_timeout_s"].default


def run_timeout_s(train_steps: int) -> float:
    """A LoRA run's timeout, long enough for `train_steps` steps on 2 cores."""
    return max(DEFAULT_RUN_TIMEOUT_S, RUN_S_PER_STEP * train_steps)


@app.command("curve")
@one_line_errors
def curve(
    iterations: int = typer.Option(2, help="Iterations, each followed by a LoRA run."),
    tasks_per_iteration: int = typer.Option(128, help="Policy episodes per iteration."),
    bank: int = typer.Option(
        510, help="Train tasks in the demonstration bank, spread over the environments and "
        "templates of --suite (the whole bank, what the leak guard lets train: MiniWoB++ 336 "
        "tasks, the sandbox 378)."),
    train_steps: int = typer.Option(96, help="Caps each LoRA run (batch 2)."),
    per_group: int = typer.Option(
        6, help="Held-out tasks per environment / template (MiniWoB++ test: 132 tasks, 71 "
        "of them with a solution no train task has)."),
    eval_max_steps: int = typer.Option(8, help="Caps the steps of each held-out episode."),
    episode_minutes: float = typer.Option(
        5.0, help="Training episodes end (timed out) after this long; an iteration waits for "
        "its last one (held-out episodes end at their step cap)."),
    train_max_steps: int = typer.Option(
        8, help="Caps each training episode's steps (a policy that loops ends sooner)."),
    suite: Suite = typer.Option(
        Suite.MINIWOB, help="The suite of the bank and the held-out set (all: both; the "
        "sandbox's curve needs a longer warm start, with --train-steps 650)."),
    attempts: int = typer.Option(
        4, help="Runs of each drawn training task in an iteration (group sampling: k >= 4 "
        "with a temperature above 0)."),
    temperature: float = typer.Option(0.7, help="The policy's sampling temperature in "
                                      "training episodes (held-out episodes run at 0)."),
    train_pool: TrainPool = typer.Option(
        TrainPool.ROLLOUT, help="Training draws: any train task, or only the rollout pool "
        "(fresh tasks the bank never holds)."),
    warm_start_first: bool = typer.Option(
        False, help="Train the warm start (v1) on the bank alone, in an empty iteration 0 "
        "before the policy's --iterations."),
    bank_share: float = typer.Option(
        0.25, help="Share of each run's rows drawn from the bank after the warm start (0: "
        "the policy's own successes only)."),
    eval_split: Split = typer.Option(
        Split.TEST, help="The held-out split every version is evaluated on: validation to "
        "choose a recipe, test for the curve you report."),
    contexts: int = typer.Option(
        16, help="Episodes in flight at once: the browser worker's contexts, the policy's "
        "decisions in flight, and each iteration's request window (each episode timed from "
        "its own request)."),
    seed: int = typer.Option(
        1, help="The run's seed: the training task draws and the LoRA runs (a second run "
        "with another seed gives the spread; the held-out set is the same for every seed)."),
    control: bool = typer.Option(
        True, help="After the loop, the matched bank-only control: the warm start's adapter "
        "trained on the bank alone for as many LoRA steps as the later versions had, "
        "evaluated on the same tasks and compared with the last version (McNemar)."),
    out: Path | None = typer.Option(
        None, help="Where the CSVs and PNG go (default: <data dir>/evaluations/curve)."),
    model: Path | None = typer.Option(
        None, "--model", exists=True, file_okay=False,
        help="A Hugging Face model directory to serve and train instead of SmolLM2-135M "
        "(with WEBGYM_TRAINER__TEMPLATE, its LLaMA-Factory chat template)."),
) -> None:
    """The learning curve on a fixed held-out set.

    The demonstration bank, the loop, and the baseline, v0, every trained version and the
    bank-only control on the suite's test split (MiniWoB++ by default, about 40 min on 2
    cores). The defaults are the recipe chosen on the validation split: 2 iterations of 128
    rollout-pool episodes, 4 attempts of each task at temperature 0.7, 16 at a time.

    Writes curve.csv (each version's success, interval and McNemar p against v0, on all
    held-out tasks and on the novel-solution ones), per_task.csv, per_group.csv and
    curve.png to --out.

    \b
    Example: webgym curve --eval-split validation --out /tmp/curve-val"""
    settings = settings_with(policy={"kind": PolicyKind.VLLM, "temperature": temperature,
                                     "max_inflight": contexts},
                             browser={"contexts": contexts},
                             rollout={"train": True, "demonstration_share": 0.0,
                                      "task_timeout_minutes": episode_minutes,
                                      "train_max_steps": train_max_steps, "eval_every": 1,
                                      "eval_per_group": per_group, "eval_suite": suite,
                                      "eval_splits": [eval_split],
                                      "eval_max_steps": eval_max_steps,
                                      "attempts_per_task": attempts, "train_pool": train_pool,
                                      "seed": seed, "iteration_window": contexts,
                                      "warm_start_first": warm_start_first},
                             trainer={"max_steps": train_steps, "seed": seed,
                                      "demonstration_share": bank_share,
                                      "run_timeout_s": run_timeout_s(train_steps)},
                             vllm={"model": str(model) if model else None})
    out = out or Path(settings.infra.data_dir) / "evaluations" / "curve"
    suites: list[Suite] = [Suite.MINIWOB, Suite.SANDBOX] if suite == Suite.ALL else [suite]
    _main_job(settings, list(settings.rollout.task_files), False, bank, suites,
              tasks_per_iteration, iterations, out, from_scratch=True, control=control)


def _main_job(settings: Settings, tasks: list[Path], monitor: bool, bank: int,
              bank_suites: list[Suite], tasks_per_iteration: int, iterations: int,
              report_dir: Path | None, from_scratch: bool = False,
              control: bool = False) -> None:
    """The controller's main job (producers.controller.main_job) with the stack, the
    processes and the export it needs from infra and consumers."""
    from producers.controller.main_job import MainJob, run_main_job

    job = MainJob(tasks, bank, bank_suites, tasks_per_iteration, iterations, report_dir,
                  monitor=monitor, from_scratch=from_scratch, control=control)
    asyncio.run(run_main_job(settings, job, _services(), console))


def _services() -> Services:
    from consumers.archiver import export_iteration
    from consumers.trainer.control import train_control
    from infra import pipeline, stack, trainer_env
    from producers.controller.main_job import Services

    async def stack_up(settings: Settings, on_step: Any) -> None:
        await stack.up(settings, on_step=on_step,
                       with_vllm=settings.policy.kind == PolicyKind.VLLM)

    async def control(settings: Settings) -> Any:
        venv, base = trainer_env.prepare(settings), trainer_env.base_model(settings)
        return await train_control(settings, venv, base)

    async def export(settings: Settings, iteration: int) -> tuple[int, Path]:
        result = await export_iteration(settings, iteration)
        return result.episodes, result.path

    return Services(
        prepare_trainer=trainer_env.prepare, stack_up=stack_up, pipeline_up=pipeline.up,
        start_monitor=pipeline.start_monitor, train_control=control, export_iteration=export,
        running=lambda settings: [r.name for r in pipeline.status(settings)
                                  if r.pid is not None])


@app.command("drive")
@one_line_errors
def drive_reference(
    task_ids: list[str] = typer.Argument(None, help="Task ids (default: every task in the file)."),
    tasks_file: Path = typer.Option(
        SANDBOX_TASKS, "--tasks", show_default=False,
        help="JSONL task file (default: environments/tasks/sandbox_tasks.jsonl)."),
    timeout_s: float = typer.Option(300.0, "--timeout", help="Seconds for all episodes."),
) -> None:
    """Run tasks through Kafka with their reference actions.

    Each task's reference actions are published as its ActionChosen events, end to end
    through the browser workers and the evaluator.

    Example: webgym drive --tasks environments/tasks/sandbox_tasks.jsonl shop-001"""
    from producers.drive_reference import drive, episode_request
    from webgym_common.stream.bus import EventProducer
    from webgym_common.tasks import read_task_file

    settings = get_settings()
    tasks, bad = read_task_file(tasks_file)
    for b in bad:
        console.print(f"[yellow]skipped line {b.line_number}:[/yellow] {b.reason}")
    chosen = [t for t in tasks if not task_ids or t.task_id in task_ids]
    if not chosen:
        raise typer.BadParameter(f"no such task in {tasks_file}: {task_ids}")
    # answered here: a running policy processor must not answer them too
    requests = [episode_request(t, timeout_s=timeout_s, driver=Driver.EXTERNAL) for t in chosen]

    async def go() -> list[Any]:
        async with EventProducer(settings, client_id="drive") as producer:
            with Progress(console=console) as progress:
                bar = progress.add_task("episodes", total=len(requests))
                done: set[str] = set()

                def tick(ep: Any) -> None:
                    if ep.completed and ep.episode_id not in done:
                        done.add(ep.episode_id)
                        progress.advance(bar)

                return await drive(settings, requests, producer, timeout_s, on_event=tick)

    results = asyncio.run(go())
    table = Table(title="reference episodes through Kafka")
    for col in ("task", "steps", "termination", "answer", "expected", "screenshots"):
        table.add_column(col)
    solved = 0
    for ep in results:
        c = ep.completed
        ok = c is not None and c.termination == "answer" and c.answer == ep.task.definite_answer
        solved += ok
        table.add_row(ep.task.task_id, str(c.steps if c else "-"),
                      c.termination if c else "no end", (c.answer if c else "") or "",
                      ep.task.definite_answer or "", str(len(ep.observations)))
    console.print(table)
    console.print(f"{solved}/{len(results)} answered as expected")


@app.command("export")
@one_line_errors
def export(
    iteration: int = typer.Option(..., "--iteration", help="Iteration to export."),
    out: Path | None = typer.Option(
        None, "--out", help="Directory (default: <infra.data_dir>/trajectories)."),
    rank: int | None = typer.Option(
        None, "--rank", help="Node rank, for iteration{N}_rank_{R}.avro."),
) -> None:
    """Write an iteration's scored episodes to an Avro file.

    An Avro container file (zstandard), iteration{N}.avro, in the --out directory.

    Example: webgym export --iteration 0 --out /tmp/trajectories"""
    from consumers.archiver import export_iteration

    result = asyncio.run(export_iteration(get_settings(), iteration, out, rank))
    console.print(f"exported {result.episodes} episodes of iteration {iteration} "
                  f"to {result.path}", highlight=False)
