"""Bus scale: many synthetic browsers through the real broker, policy and evaluator.

  .venv/bin/python -m bench.bus_scale [--episodes 64,256,512] [--steps 6]
      [--policy-latency-ms 200] [--browser-step-ms 50] [--browsers 4]
      [--policy-workers 1] [--markdown PATH]

No Chromium and no model: what is measured is the bus and the processors around it when
browsers are many. For each level, on a fresh topic prefix of the embedded stack (kafka
and MinIO, started if they are not up):

- the real policy processor (`webgym worker policy --kind teacher`, one process or
  --policy-workers of them) answers every observation from the task's reference actions
  after a fixed `policy.teacher_delay_s` (the synthetic policy: a model that always takes
  --policy-latency-ms), storing its prompt in MinIO like a model's;
- the real evaluator (`webgym worker evaluator`, rules judge) scores every episode;
- --browsers synthetic browser workers (asyncio tasks in this process, one Kafka producer
  each, the episodes dealt out among them like contexts) run all the episodes at once:
  EpisodeRequested (as the controller would), StepObserved step 0, then per step wait
  for its ActionChosen (one reader of webgym.actions for all episodes, routing by
  episode and step), "execute" it in --browser-step-ms, publish the next observation;
  after --steps actions the terminal observation (max_steps) and the EpisodeCompleted,
  exactly the shapes a browser worker publishes (producers/browser/episode.py).

Measured per level: wall time from the first request to the last completion, steps/s
(actions received / wall), and the bus latency of each step = (observation published ->
its action received) - the policy's fixed latency, p50 and p99 (it includes the policy
processor's own work: triage, prompt, MinIO put, table write, publish; and queueing
once more episodes are in flight than the policy decides at once: `policy.max_inflight`
is at most 256 per process). Then the outcome is counted from the topics themselves,
read from the start with a plain consumer (harness: `read_events`, `tally`):
episodes never completed or never scored are lost, completed or scored more than once
are duplicated; a step with no action is a lost step, a step with more than one
distinct ActionChosen a duplicated step. Notes under the table split the bus latency
(observation publish, policy side, action back; step 0, which waits for the policy to
have read its request, apart from the later steps) and give each process's CPU time;
--markdown appends the table and notes to a file (harness/report.py).

The observations are kept small but realistic: 20 marks and their short aria tree
(~2.3 KB Avro), no screenshot (there is no browser to take one; uploading would measure
MinIO), so that on 2 cores the bench process is not what limits: it takes 5-11% of a core
at 512 episodes (CPU note). The policy processor is what does: ~5 ms of CPU per decision,
~1.9 ms of it the teacher building the prompt a model would have seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.synthetic_browsers import Level, Options, browser
from harness.delivery_counts import (
    StepCount,
    breakdown,
    count_steps,
    delivery_notes,
    episode_outcomes,
    percentile,
)
from harness.launch import PipelineProcess
from harness.machine import describe_machine
from harness.outcomes import Tally
from harness.report import (
    append_markdown,
    bench_command,
    markdown_table,
    repeat_note,
    spread_cell,
)
from harness.synthetic import Router, requests_for, synthetic_task
from harness.topic_reads import read_events
from infra import stack
from webgym_common.choices import PolicyKind
from webgym_common.config import Settings, get_settings
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
)
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.topics import Topic

console = Console()
READY_S = 120.0
WARM_STEPS = 4  # steps of the one warm-up episode of each level
# episodes in flight; steps (actions due); wall s (first request -> last completion);
# steps/s; ideal steps/s (no bus: episodes / (policy latency + browser step)); bus latency
# p50/p99 ms, and the same less the policy's own phases (kafka: the trips through Kafka and
# the policy's queue and bookkeeping); all scored s (first request -> last score); lost and
# duplicated, episodes and steps, counted from the topics.
COLUMNS = ["episodes", "steps", "wall s", "steps/s", "ideal steps/s", "bus p50 ms",
           "bus p99 ms", "kafka p50 ms", "kafka p99 ms", "all scored s", "lost ep",
           "lost steps", "dup ep", "dup steps"]


def level_settings(base: Settings, episodes: int, opts: Options, data: Path) -> Settings:
    per_worker = -(-episodes // opts.policy_workers)
    return base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"topic_prefix": f"bus{uuid.uuid4().hex[:8]}"}),
        "policy": base.policy.model_copy(update={
            "kind": PolicyKind.TEACHER, "teacher_delay_s": opts.policy_latency_ms / 1000,
            "teacher_delay_jitter_s": 0.0, "max_inflight": max(1, min(256, per_worker))}),
        "evaluator": base.evaluator.model_copy(update={"max_inflight": 16}),
        "infra": base.infra.model_copy(update={"data_dir": data}),
    })


async def wait_ready(procs: list[PipelineProcess]) -> None:
    deadline = time.monotonic() + READY_S
    while not all(p.is_ready() for p in procs):
        for p in procs:
            if p.proc.poll() is not None:
                raise RuntimeError(f"{p.log_path.name} exited:\n{p.log_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready in {READY_S:.0f}s: "
                               + ", ".join(str(p.log_path) for p in procs if not p.is_ready()))
        await asyncio.sleep(0.3)


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of a process (this one by default), from /proc; 0 if gone."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_level(base: Settings, episodes: int, opts: Options, progress: Progress,
                    repeat: int = 1) -> list[Level]:
    """`repeat` runs of `episodes` at once on one set of processes (started and warmed up
    once), each with episodes of its own; then each run counted from the topics."""
    data = Path(tempfile.mkdtemp(prefix="bench-bus-scale-"))
    settings = level_settings(base, episodes, opts, data)
    runs: list[tuple[list[EpisodeRequested], Level]] = []
    await create_topics(settings)
    procs = [PipelineProcess(settings, ["worker", "policy", "--kind", "teacher"],
                             data / f"policy-{i}.log") for i in range(opts.policy_workers)]
    procs.append(PipelineProcess(settings, ["worker", "evaluator"], data / "evaluator.log"))
    tasks = [synthetic_task(n, opts.steps) for n in range(8)]
    try:
        await wait_ready(procs)
        async with EventProducer(settings, client_id="bench-reader") as producer:
            reader = EventConsumer(settings, [Topic.ACTIONS, Topic.EPISODES_SCORED], None,
                                   producer, client_id="bench-reader")
            await reader.start()
            router = Router(reader)
            routing = asyncio.create_task(router.run())
            try:
                # warm-up: group joins, table recovery, first transactions; not measured
                # (a few steps do it: the steps after them are the same trips)
                warm_steps = min(opts.steps, WARM_STEPS)
                warm = requests_for("warm", 1, warm_steps, tasks)
                await browser(0, settings, warm, warm_steps, router, Level(1, warm_steps),
                              replace(opts, steps=warm_steps), lambda: None)
                for run in range(repeat):
                    reqs = requests_for(f"{settings.kafka.topic_prefix}-r{run}", episodes,
                                        opts.steps, tasks)
                    level = Level(episodes, opts.steps, logs=data)
                    await measure_run(settings, procs, router, reqs, level, opts, progress,
                                      f"{episodes} episodes, run {run + 1}/{repeat}")
                    runs.append((reqs, level))
            finally:
                routing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await routing
                await reader.stop()
        await count_from_topics(settings, runs)
    finally:
        for p in procs:
            p.stop()
    return [level for _, level in runs]


async def measure_run(settings: Settings, procs: list[PipelineProcess], router: Router,
                      reqs: list[EpisodeRequested], level: Level, opts: Options,
                      progress: Progress, label: str) -> None:
    """One run: the requests dealt out among the synthetic browsers, all at once, until
    every episode is completed and scored (or the score timeout)."""
    bar = progress.add_task(label, total=len(reqs))
    scored_bar = progress.add_task("  scored", total=len(reqs))
    shares = [reqs[k::opts.browsers] for k in range(opts.browsers)]
    named = {"bench": None, **{p.log_path.stem: p.proc.pid for p in procs}}
    cpu_before = {n: cpu_seconds(pid) for n, pid in named.items()}
    started = time.time()
    await asyncio.gather(*(
        browser(k, settings, share, opts.steps, router, level, opts,
                lambda: progress.advance(bar)) for k, share in enumerate(shares) if share))
    level.wall_s = time.time() - started
    ids = {r.episode_id for r in reqs}
    deadline = time.monotonic() + opts.score_timeout_s
    while time.monotonic() < deadline:
        done = ids & router.scored.keys()
        progress.update(scored_bar, completed=len(done))
        if len(done) == len(ids):
            level.scored_s = max(router.scored[e] for e in ids) - started
            break
        router.scored_changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(router.scored_changed.wait(), 1.0)
    level.cpu_s = {n: cpu_seconds(pid) - cpu_before[n] for n, pid in named.items()}


async def count_from_topics(settings: Settings,
                            runs: list[tuple[list[EpisodeRequested], Level]]) -> None:
    """Each run's outcome as the topics hold it, read from the start once (no group,
    read_committed)."""
    actions = [e for e in await read_events(settings, Topic.ACTIONS, set())
               if isinstance(e, ActionChosen)]
    completed = [e for e in await read_events(settings, Topic.EPISODES_COMPLETED, set())
                 if isinstance(e, EpisodeCompleted)]
    scored = [e for e in await read_events(settings, Topic.EPISODES_SCORED, set())
              if isinstance(e, EpisodeScored)]
    for reqs, level in runs:
        requested = {r.episode_id: r.task.task_id for r in reqs}
        level.tally = episode_outcomes(requested, completed, scored)
        level.step_count = count_steps(((a.episode_id, a.step, a.event_id) for a in actions),
                                       {r.episode_id: r.max_steps for r in reqs})


def row(runs: list[Level], opts: Options) -> list[str]:
    """One level's row: each figure the median of its runs [min, max]; lost and duplicated
    summed over the runs."""
    tallies: list[Tally] = []
    counts: list[StepCount] = []
    for r in runs:
        assert r.tally is not None and r.step_count is not None
        tallies.append(r.tally)
        counts.append(r.step_count)
    first = runs[0]
    per_step_s = (opts.policy_latency_ms + opts.browser_step_ms) / 1000
    ideal = f"{first.episodes / per_step_s:.0f}" if per_step_s else "-"
    scored = [r.scored_s for r in runs if r.scored_s is not None]
    return [str(first.episodes), str(counts[0].steps),
            spread_cell((r.wall_s for r in runs), ".1f"),
            spread_cell((r.actions / r.wall_s for r in runs), ".0f"), ideal,
            spread_cell((percentile(r.bus_ms, 0.5) for r in runs), ".0f"),
            spread_cell((percentile(r.bus_ms, 0.99) for r in runs), ".0f"),
            spread_cell((percentile(r.kafka_ms, 0.5) for r in runs), ".1f"),
            spread_cell((percentile(r.kafka_ms, 0.99) for r in runs), ".0f"),
            spread_cell(scored, ".1f") + ("" if len(scored) == len(runs) else " (not all)"),
            str(sum(t.lost for t in tallies)), str(sum(c.lost_steps for c in counts)),
            str(sum(t.duplicated for t in tallies)),
            str(sum(c.duplicated_steps for c in counts))]


def level_notes(runs: list[Level], opts: Options) -> list[str]:
    """A level's notes: the bus latency's parts over all its runs' steps, the median CPU
    share of each process, and whatever went missing or came twice in any run."""
    n = runs[0].episodes
    parts = [p for r in runs for p in r.parts_ms]
    first = [v for r in runs for v in r.first_ms]
    later = [v for r in runs for v in r.later_ms]
    notes = [f"- {n}: {breakdown(parts)}",
             f"- {n}: bus p50 / p99 ms of step 0 (the policy reads its request first) "
             f"{percentile(first, 0.5):.0f} / {percentile(first, 0.99):.0f}, of the later "
             f"steps {percentile(later, 0.5):.0f} / {percentile(later, 0.99):.0f}"]
    spans = [r.scored_s or r.wall_s for r in runs]
    notes.append(f"- {n}: CPU until all scored ({spread_cell(spans, '.1f', ' s')}): "
                 + ", ".join(f"{name} " + spread_cell(
                     (r.cpu_s.get(name, 0.0) / span for r, span in zip(runs, spans, strict=True)),
                     ".0%") for name in runs[0].cpu_s))
    for i, level in enumerate(runs):
        assert level.tally is not None and level.step_count is not None
        which = f"{n}, run {i + 1}" if len(runs) > 1 else f"{n}"
        for note in delivery_notes(level.tally, level.step_count):
            notes.append(f"- {which}: {note}")
        if level.timeouts or level.wrong_actions:
            notes.append(f"- {which}: {level.timeouts} steps timed out waiting, "
                         f"{level.wrong_actions} actions not the reference's")
        if level.scored_s is None:
            notes.append(f"- {which}: not every episode scored in "
                         f"{opts.score_timeout_s:.0f}s (logs: {level.logs})")
    return notes


def main(
    episodes: str = typer.Option("64,256,512", help="episodes in flight per level, comma "
                                 "separated"),
    steps: int = typer.Option(6, min=1, help="actions per episode"),
    policy_latency_ms: float = typer.Option(200.0, min=0, help="the policy's fixed latency"),
    browser_step_ms: float = typer.Option(50.0, min=0, help="executing an action and "
                                          "observing the page"),
    browsers: int = typer.Option(4, min=1, help="synthetic browser workers (Kafka producers)"),
    policy_workers: int = typer.Option(1, min=1, help="policy processes (max_inflight <= 256 "
                                       "each)"),
    repeat: int = typer.Option(1, min=1, help="runs of each level (on the same processes); "
                               "each figure is the median, its min and max after it"),
    markdown: Path | None = typer.Option(None, help="append the table to this file"),
    warm_up: bool = typer.Option(True, help="a small level first, not reported"),
) -> None:
    if not console.is_terminal:
        console.width = max(console.width, 150 if repeat == 1 else 240)  # a row a line
    console.print(describe_machine())
    opts = Options(steps=steps, policy_latency_ms=policy_latency_ms,
                   browser_step_ms=browser_step_ms, browsers=browsers,
                   policy_workers=policy_workers)
    levels = [int(x) for x in episodes.split(",") if x.strip()]
    base = get_settings()
    asyncio.run(stack.up(base, only=["kafka", "minio"]))
    results: list[list[Level]] = []
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn()]
    with Progress(*columns, console=console) as progress:
        if warm_up:  # a fresh broker's JVM compiles its hot paths during the first requests
            asyncio.run(run_level(base, 4, replace(opts, steps=3), progress))
        for n in levels:
            results.append(asyncio.run(run_level(base, n, opts, progress, repeat)))
    title = (f"bus scale: synthetic browsers, teacher policy at {policy_latency_ms:.0f} ms, "
             f"{browser_step_ms:.0f} ms per browser step, {steps} steps/episode, "
             f"{browsers} browsers, {policy_workers} policy process(es)"
             + (f", median of {repeat}" if repeat > 1 else ""))
    table = Table(title=title)
    for col in COLUMNS:
        table.add_column(col, justify="right")
    rows = [row(runs, opts) for runs in results]
    for r in rows:
        table.add_row(*r)
    console.print(table)
    notes = [note for runs in results for note in level_notes(runs, opts)]
    if repeat > 1:
        notes.append(f"- {repeat_note(repeat, ratios=False)} The runs of a level share its "
                     "policy and evaluator processes (started and warmed up once); lost and "
                     "duplicated are summed over the runs, the latency parts above pool their "
                     "steps.")
    for note in notes:
        console.print(note, markup=False)
    if markdown is not None:
        command = bench_command("bench.bus_scale", sys.argv[1:])
        text = markdown_table(title, command, COLUMNS, rows, "\n".join(notes),
                              when=datetime.now(UTC))
        append_markdown(markdown, text)
        console.print(f"appended to {markdown}")


if __name__ == "__main__":
    typer.run(main)
