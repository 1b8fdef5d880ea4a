"""Rollout benchmark: one iteration of sandbox tasks through the pipeline, against its limit
and against a naive loop, with where each step's time went.

  .venv/bin/python -m bench.rollout_iteration [--tasks 96] [--contexts 8,16] \
      [--latency 0,0.5] [--window-s 30] [--repeat 1] [--markdown docs/benchmarks.md]

The tasks: a fixed uniform sample of the sandbox's generated train tasks. The pipeline:
controller, one browser worker (C contexts), the teacher-forcing policy with a
fixed time per decision (the `--latency` a model server would take), evaluator, history and
metrics, on the embedded stack. A step is one decision (the ANSWER included); its time is
counted from the iteration's start (sampling) to its close (every episode scored).

In the same run, with the worker's own execute/observe code and no Kafka, no MinIO, on the
tasks the pipeline ran, taken round and round for --window-s seconds:
- the naive loop: one page, one task at a time, sleeping the latency before each decision;
- the CPU ceiling: C such loops at once with no latency (what 2 cores give the browser).
The sample leaves out the sandbox's hostile pages (anti-bot walls the worker ends at once
and a plain loop would keep acting on until its timeouts).
The limit is min(CPU ceiling, C / (browser time per step + latency)), the browser time per
step taken from the naive loop. The table gives the pipeline's steps/s as a share of its
limit and as a multiple of the naive loop, then the mean of each phase of a step, read back
from the events' timings (webgym_common.timings).

With --repeat N everything is measured N times in rounds (each pipeline, then the naive
loop, then the ceilings: drift on a shared machine falls on the pipeline and its baselines
alike); each figure is the median of its N runs with [min, max], and a ratio is the
pipeline's median over the baseline's median (harness.report.ratio_spread).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console

from bench.direct import open_observed_page
from harness.machine import (
    PIPELINE_KINDS,
    cpu_seconds,
    cpu_used_since,
    describe_machine,
    pipeline_overhead,
)
from harness.report import (
    append_markdown,
    bench_command,
    console_table,
    markdown_table,
    ratio_spread,
    repeat_note,
    spread_cell,
)
from infra import pipeline, stack
from producers.browser.browser_pool import BrowserPool
from producers.browser.execute import ActionFailed, execute
from producers.browser.observe import observe
from producers.catalog import load_tasks
from producers.controller.rollout import run_iteration
from webgym_common.agent.teacher import resolve_reference_action
from webgym_common.choices import PolicyKind, SamplingStrategy
from webgym_common.config import Settings, get_settings
from webgym_common.events import ActionChosen, StepObserved, Task
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_to_end
from webgym_common.timings import STEP_PHASES, mean_breakdown, step_breakdown
from webgym_common.topics import Topic

console = Console(width=160)
# The 57 hand-written tasks (a train iteration draws their 39 train ones).
TASKS_FILE = Path("environments/tasks/sandbox_tasks.jsonl")
# The rollout's sample: the 414 generated train tasks, bank and rollout pool (4.5
# reference steps on average).
ROLLOUT_TASKS = Path("environments/tasks/generated_tasks.jsonl")
PHASES = (*STEP_PHASES, "queue")
WARM_UP_TASKS = 48
# The environment (Chromium, the sites), then the pipeline's own processes (the controller
# runs in this bench's process); the table adds their sum and the rest of the machine.
CPU_KINDS = ("chromium", "web sites", *PIPELINE_KINDS)
CPU_COLUMNS = ["latency", "contexts", *CPU_KINDS, "pipeline overhead", "other"]


@dataclass
class PipelineRun:
    wall_s: float
    decisions: int
    tasks: list[Task]
    success: float
    phases: dict[str, float]
    cpu_s: dict[str, float]  # CPU seconds each kind of process used during the iteration
    rewards: dict[str, float]  # task id -> its episode's reward

    @property
    def rate(self) -> float:
        return self.decisions / self.wall_s


async def breakdown(settings: Settings, producer: EventProducer) -> dict[str, float]:
    """The mean phases of the run's steps: each action with the observation that followed."""
    async with EventConsumer(settings, [Topic.OBSERVATIONS, Topic.ACTIONS], None, producer,
                             client_id="bench-breakdown", any_type=True) as reader:
        events = [r.event for r in await read_to_end(reader)]
    observed = {(e.episode_id, e.step): e.timings_ms for e in events
                if isinstance(e, StepObserved)}
    steps = [step_breakdown(observed[(a.episode_id, a.step + 1)], a.timings_ms)
             for a in events if isinstance(a, ActionChosen)
             and (a.episode_id, a.step + 1) in observed]
    return mean_breakdown(steps)


async def via_pipeline(base: Settings, n: int, contexts: int, delay_s: float,
                       tasks_file: Path = TASKS_FILE,
                       browser: dict[str, object] | None = None) -> PipelineRun:
    """One iteration of `n` tasks of `tasks_file` (train split, a fixed uniform sample) on
    a pipeline of its own; `browser`: more browser settings."""
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    data = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    settings = base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"topic_prefix": prefix}),
        "browser": base.browser.model_copy(update={"contexts": contexts, **(browser or {})}),
        "policy": base.policy.model_copy(update={
            "kind": PolicyKind.TEACHER, "teacher_delay_s": delay_s, "max_inflight": 2 * contexts}),
        "rollout": base.rollout.model_copy(update={"strategy": SamplingStrategy.UNIFORM, "seed": 1,
                                                   "completion_threshold": 1.0}),
        # Pipeline processes keep their pid files and logs apart from the stack's.
        "infra": base.infra.model_copy(update={"data_dir": data}),
    })
    await create_topics(settings)
    try:
        await pipeline.up(settings)
        async with EventProducer(settings, client_id="bench") as producer:
            await load_tasks(tasks_file, producer)
            cpu_before = cpu_seconds(own="controller")
            started = time.perf_counter()
            state, _ = await run_iteration(settings, producer, 0, "train", n)
            wall = time.perf_counter() - started
            cpu = cpu_used_since(cpu_before, own="controller")
            phases = await breakdown(settings, producer)
        done = state.completed.values()
        decisions = sum(c.steps + (c.termination == "answer") for c in done)
        tasks = [r.task for r in state.requests.values()]
        solved = sum(s.reward for s in state.scored.values()) / max(1, len(state.scored))
        rewards = {state.requests[eid].task.task_id: s.reward for eid, s in state.scored.items()
                   if eid in state.requests}
        return PipelineRun(wall, decisions, tasks, solved, phases, cpu, rewards)
    finally:
        pipeline.down(settings)


async def play_task(pool: BrowserPool, settings: Settings, task: Task, delay_s: float,
                    done: list[float]) -> None:
    """One task's reference actions with the worker's code; each decision's end time goes
    into `done` once its action is carried out and observed (an ANSWER once decided)."""
    cfg = settings.browser
    session, context, obs = await open_observed_page(pool, cfg, settings.resolve_url(task.website))
    try:
        for ref in task.reference_actions:
            await asyncio.sleep(delay_s)
            action = resolve_reference_action(ref, obs.marks)
            if action.kind == "ANSWER":
                done.append(time.perf_counter())
                break
            session.marks = {m.index: m for m in obs.marks}
            with contextlib.suppress(ActionFailed):  # reported, as the worker would
                await execute(session, action, cfg)
            obs = await observe(*session.attached, cfg)
            done.append(time.perf_counter())
    finally:
        with contextlib.suppress(Exception):
            await context.close()


async def direct(settings: Settings, tasks: list[Task], delay_s: float, concurrency: int,
                 seconds: float) -> float:
    """Decisions/s of `concurrency` loops taking the tasks in turn (round and round) for
    `seconds`, no Kafka, no MinIO: a rate while every loop is busy, no tail."""
    pool = BrowserPool(settings.browser, lambda reason: None)
    await pool.start()
    turns = itertools.cycle(tasks)
    done: list[float] = []

    async def loop() -> None:
        while True:
            await play_task(pool, settings, next(turns), delay_s, done)

    started = time.perf_counter()
    loops = [asyncio.create_task(loop()) for _ in range(concurrency)]
    try:
        await asyncio.sleep(seconds)
    finally:
        for task in loops:
            task.cancel()
        with contextlib.suppress(TimeoutError):  # a context slow to close is the pool's
            await asyncio.wait_for(asyncio.gather(*loops, return_exceptions=True), 30)
        await pool.stop()
    # A loop that died counts nothing: a rate from the survivors would be no baseline.
    if crashed := [t.exception() for t in loops if t.done() and not t.cancelled()
                   and t.exception() is not None]:
        raise RuntimeError(f"{len(crashed)} of {concurrency} loops failed") from crashed[0]
    return sum(1 for t in done if t - started <= seconds) / seconds


def without_hostile(path: Path) -> Path:
    """A copy of the task file without the sandbox's hostile pages."""
    kept = [line for line in path.read_text().splitlines()
            if line.strip() and json.loads(line).get("domain") != "sandbox-hostile"]
    out = Path(tempfile.mkdtemp(prefix="bench-tasks-")) / path.name
    out.write_text("\n".join(kept) + "\n")
    return out


def limit_of(ceiling: float, contexts: int, naive_rate: float) -> float:
    """min(CPU ceiling, contexts / (browser time per step + latency)): the naive loop takes
    exactly (browser time per step + latency) per step."""
    return min(ceiling, contexts * naive_rate)


def main(tasks: int = 96, contexts: str = "8,16", latency: str = "0,0.5",
         window_s: float = 30.0, repeat: int = typer.Option(1, min=1),
         warm_up: bool = typer.Option(True, help="An iteration first, not measured."),
         markdown: Path | None = None) -> None:
    """`repeat`: runs of everything (each pipeline, the naive loop and the CPU ceiling, in
    turn: a round measures each once); each figure is the median of its runs, min and max
    after it, and a ratio the pipeline's median over its baseline's median. `warm_up`: a
    fresh broker spends its first minute compiling (JIT): measured cold, Kafka's CPU per step
    came out 2.5x its steady state, which is what a running pipeline pays."""
    if repeat > 1:
        console.width = 280  # a row a line: the phase table has 13 columns of ranges
    console.print(describe_machine())
    settings = get_settings()
    asyncio.run(stack.up(settings))
    levels = [int(c) for c in contexts.split(",")]
    task_file = without_hostile(ROLLOUT_TASKS)
    delays = [float(d) for d in latency.split(",")]
    if warm_up:
        console.print(f"warm-up: an iteration of {WARM_UP_TASKS} tasks, not measured ...")
        asyncio.run(via_pipeline(settings, WARM_UP_TASKS, levels[-1], delays[-1], task_file))
    columns = ["latency", "contexts", "pipeline steps/s", "limit", "of limit", "naive steps/s",
               "x naive", "success", "wall s", "steps"]
    runs: dict[tuple[float, int], list[PipelineRun]] = {}
    naive: dict[float, list[float]] = {}
    ceilings: dict[int, list[float]] = {}
    for round_ in range(repeat):
        which = f" (run {round_ + 1}/{repeat})" if repeat > 1 else ""
        for delay in delays:
            for c in levels:
                console.print(f"pipeline: {c} contexts, {delay:.1f} s per decision{which} ...")
                run = asyncio.run(via_pipeline(settings, tasks, c, delay, task_file))
                runs.setdefault((delay, c), []).append(run)
            console.print(f"naive loop: {delay:.1f} s per decision{which} ...")
            naive.setdefault(delay, []).append(
                asyncio.run(direct(settings, run.tasks, delay, 1, window_s)))
            for c in levels:
                if len(ceilings.get(c, [])) <= round_:
                    console.print(f"CPU ceiling: {c} loops at once{which} ...")
                    ceilings.setdefault(c, []).append(
                        asyncio.run(direct(settings, run.tasks, 0.0, c, window_s)))
    rows: list[list[str]] = []
    phase_rows: list[list[str]] = []
    cpu_rows: list[list[str]] = []
    for (delay, c), done in runs.items():
        rates = [r.rate for r in done]
        # each round's limit from that round's ceiling and naive loop
        limits = [limit_of(ceil, c, rate) for ceil, rate in
                  zip(ceilings[c], naive[delay], strict=True)]
        rows.append([f"{delay:.1f} s", str(c), spread_cell(rates), spread_cell(limits),
                     ratio_spread(rates, limits).cell(), spread_cell(naive[delay]),
                     ratio_spread(rates, naive[delay]).cell(suffix="x"),
                     spread_cell(r.success for r in done),
                     spread_cell((r.wall_s for r in done), ".1f"),
                     spread_cell((r.decisions for r in done), ".0f")])
        phase_rows.append([f"{delay:.1f} s", str(c), *(
            spread_cell((r.phases.get(p, 0.0) for r in done), ".1f") for p in PHASES)])
        cpu_rows.append([f"{delay:.1f} s", str(c), *(
            spread_cell((1000 * r.cpu_s.get(k, 0.0) / r.decisions for r in done), ".0f")
            for k in CPU_KINDS),
            spread_cell((1000 * pipeline_overhead(r.cpu_s) / r.decisions for r in done), ".0f"),
            spread_cell((1000 * r.cpu_s.get("other", 0.0) / r.decisions for r in done), ".0f")])
    console.print(console_table(
        f"one rollout iteration of {tasks} sandbox tasks (teacher forcing)", columns, rows))
    console.print(console_table("where a step's time went (mean ms)",
                                ["latency", "contexts", *PHASES], phase_rows))
    console.print(console_table("CPU ms per step, by process (all cores)",
                                CPU_COLUMNS, cpu_rows))
    repeated = f" {repeat_note(repeat)}" if repeat > 1 else ""
    if repeated:
        console.print(repeated.strip(), markup=False)
    if markdown is not None:
        command = bench_command("bench.rollout_iteration", [
            "--tasks", str(tasks), "--contexts", contexts, "--latency", latency,
            "--window-s", f"{window_s:g}", "--repeat", str(repeat)])
        append_markdown(markdown, markdown_table(
            f"Rollout: {tasks} sandbox tasks, pipeline vs limit and naive loop", command,
            columns, rows,
            "limit = min(CPU ceiling: C worker loops at once with no Kafka, C / (browser step "
            "+ latency)); naive: one task at a time with the worker's own code; a round runs "
            "the pipeline, the naive loop and the ceiling in turn, and each round's limit "
            f"comes from its own ceiling and naive loop.{repeated}"))
        append_markdown(markdown, markdown_table(
            "Rollout: where a step's time went (mean ms per step, from the events' timings)",
            command, ["latency", "contexts", *PHASES], phase_rows,
            "bus = the browser's wait for the action less the publish and the policy's "
            "model, prompt_store and remember; queue (observation produced -> decision "
            f"started) overlaps it.{repeated}"))
        append_markdown(markdown, markdown_table(
            "Rollout: CPU ms per step by process", command, CPU_COLUMNS, cpu_rows,
            "Read from /proc over the iteration (harness.machine.cpu_seconds). Pipeline "
            "overhead = the pipeline's own processes: the browser worker and its Playwright "
            "driver, Kafka, MinIO, the policy, the evaluator, the other workers and the "
            "controller (this bench's process); Chromium and the sites are the environment; "
            "other = the rest of the machine. Measured after a warm-up iteration, so a "
            f"fresh broker's JIT compilation is not counted.{repeated}"))


if __name__ == "__main__":
    typer.run(main)
