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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

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
from harness.report import append_markdown, markdown_table
from harness.synthetic import MARKS, Router, observation, requests_for, synthetic_task
from harness.topic_reads import read_events
from infra import stack
from webgym_common.choices import PolicyKind
from webgym_common.config import Settings, get_settings
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    utc_now,
)
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.topics import Topic

console = Console()
READY_S = 120.0
# episodes in flight; steps (actions due); wall s (first request -> last completion);
# steps/s; ideal steps/s (no bus: episodes / (policy latency + browser step)); bus latency
# p50/p99 ms, and the same less the policy's own phases (kafka: the trips through Kafka and
# the policy's queue and bookkeeping); all scored s (first request -> last score); lost and
# duplicated, episodes and steps, counted from the topics.
COLUMNS = ["episodes", "steps", "wall s", "steps/s", "ideal steps/s", "bus p50 ms",
           "bus p99 ms", "kafka p50 ms", "kafka p99 ms", "all scored s", "lost ep",
           "lost steps", "dup ep", "dup steps"]




@dataclass
class Level:
    episodes: int
    steps: int
    wall_s: float = 0.0
    actions: int = 0
    bus_ms: list[float] = field(default_factory=list)
    # ... less the policy's own measured phases (model, prompt_store, remember): Kafka alone
    kafka_ms: list[float] = field(default_factory=list)
    # per step: observation publish acked, then the action produced (minus the policy's
    # latency), then the action read here (ms; wall clocks of one machine)
    parts_ms: list[tuple[float, float, float]] = field(default_factory=list)
    first_ms: list[float] = field(default_factory=list)  # bus latency of step 0
    later_ms: list[float] = field(default_factory=list)  # ... of the steps after it
    scored_s: float | None = None  # from the first request until every episode was scored
    tally: Tally | None = None
    step_count: StepCount | None = None
    cpu_s: dict[str, float] = field(default_factory=dict)  # process -> CPU s while measured
    timeouts: int = 0
    wrong_actions: int = 0
    logs: Path | None = None


async def browser(k: int, settings: Settings, requests: list[EpisodeRequested], steps: int,
                  router: Router, level: Level, opts: Options,
                  on_done: Callable[[], object]) -> None:
    """One synthetic browser worker with len(requests) contexts, all playing at once."""
    worker = f"synthetic-{k}"
    delay_ms = opts.policy_latency_ms
    async with EventProducer(settings, client_id=f"bench-{worker}") as producer:
        async def play(req: EpisodeRequested) -> None:
            eid, started = req.episode_id, utc_now()
            await producer.publish(Topic.EPISODES, eid, req)  # as the controller does
            termination, reason, step = "max_steps", None, 0
            while True:
                fut = router.expect(eid, step)
                sent = time.time()
                await producer.publish(Topic.OBSERVATIONS, eid, observation(req, step, worker))
                acked = time.time()
                try:
                    action, received = await asyncio.wait_for(fut, opts.action_timeout_s)
                except TimeoutError:
                    router.waiting.pop((eid, step), None)
                    termination = "timeout"
                    reason = f"no action for step {step} in {opts.action_timeout_s:.0f}s"
                    level.timeouts += 1
                    break
                level.actions += 1
                level.bus_ms.append((received - sent) * 1000 - delay_ms)
                level.kafka_ms.append((received - sent) * 1000 - sum(
                    action.timings_ms.get(p, 0.0) for p in ("model", "prompt_store",
                                                             "remember")))
                (level.first_ms if step == 0 else level.later_ms).append(level.bus_ms[-1])
                produced = action.produced_at.timestamp()
                level.parts_ms.append(((acked - sent) * 1000,
                                       (produced - acked) * 1000 - delay_ms,
                                       (received - produced) * 1000))
                want = req.task.reference_actions[step].name
                if action.action.kind != "Click" or action.action.element is None or \
                        MARKS[action.action.element - 1].name != want:
                    level.wrong_actions += 1
                if opts.browser_step_ms:
                    await asyncio.sleep(opts.browser_step_ms / 1000)
                step += 1
                if step >= req.max_steps:
                    await producer.publish(Topic.OBSERVATIONS, eid,
                                           observation(req, step, worker, terminal=True))
                    break
            await producer.publish(Topic.EPISODES_COMPLETED, eid, EpisodeCompleted(
                episode_id=eid, task_id=req.task.task_id, iteration=req.iteration,
                split=req.split, steps=step, termination=termination, reason=reason,
                final_url=f"http://127.0.0.1/shop/?page={step}", started_at=started,
                worker_id=worker))
            on_done()

        await asyncio.gather(*(play(r) for r in requests))


@dataclass(frozen=True)
class Options:
    steps: int = 6
    policy_latency_ms: float = 200.0
    browser_step_ms: float = 50.0
    browsers: int = 4
    policy_workers: int = 1
    action_timeout_s: float = 120.0
    score_timeout_s: float = 180.0


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


async def run_level(base: Settings, episodes: int, opts: Options, progress: Progress) -> Level:
    data = Path(tempfile.mkdtemp(prefix="bench-bus-scale-"))
    settings = level_settings(base, episodes, opts, data)
    level = Level(episodes, opts.steps, logs=data)
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
                warm = requests_for("warm", 1, opts.steps, tasks)
                await browser(0, settings, warm, opts.steps, router, Level(1, opts.steps),
                              opts, lambda: None)
                bar = progress.add_task(f"{episodes} episodes", total=episodes)
                scored_bar = progress.add_task("  scored", total=episodes)
                reqs = requests_for(settings.kafka.topic_prefix, episodes, opts.steps, tasks)
                shares = [reqs[k::opts.browsers] for k in range(opts.browsers)]
                named = {"bench": None, **{p.log_path.stem: p.proc.pid for p in procs}}
                cpu_before = {n: cpu_seconds(pid) for n, pid in named.items()}
                started = time.time()
                await asyncio.gather(*(
                    browser(k, settings, share, opts.steps, router, level, opts,
                            lambda: progress.advance(bar)) for k, share in enumerate(shares)
                    if share))
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
            finally:
                routing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await routing
                await reader.stop()
        await count_from_topics(settings, reqs, level)
    finally:
        for p in procs:
            p.stop()
    return level


async def count_from_topics(settings: Settings, reqs: list[EpisodeRequested],
                            level: Level) -> None:
    """The outcome as the topics hold it, read from the start (no group, read_committed)."""
    requested = {r.episode_id: r.task.task_id for r in reqs}
    actions = [e for e in await read_events(settings, Topic.ACTIONS, set())
               if isinstance(e, ActionChosen)]
    completed = [e for e in await read_events(settings, Topic.EPISODES_COMPLETED, set())
                 if isinstance(e, EpisodeCompleted)]
    scored = [e for e in await read_events(settings, Topic.EPISODES_SCORED, set())
              if isinstance(e, EpisodeScored)]
    level.tally = episode_outcomes(requested, completed, scored)
    level.step_count = count_steps(((a.episode_id, a.step, a.event_id) for a in actions),
                                   {eid: r.max_steps for eid, r in
                                    ((r.episode_id, r) for r in reqs)})


def row(level: Level, opts: Options) -> list[str]:
    t, s = level.tally, level.step_count
    assert t is not None and s is not None
    per_step_s = (opts.policy_latency_ms + opts.browser_step_ms) / 1000
    ideal = f"{level.episodes / per_step_s:.0f}" if per_step_s else "-"
    return [str(level.episodes), str(s.steps), f"{level.wall_s:.1f}",
            f"{level.actions / level.wall_s:.0f}", ideal,
            f"{percentile(level.bus_ms, 0.5):.0f}", f"{percentile(level.bus_ms, 0.99):.0f}",
            f"{percentile(level.kafka_ms, 0.5):.1f}", f"{percentile(level.kafka_ms, 0.99):.0f}",
            "-" if level.scored_s is None else f"{level.scored_s:.1f}",
            str(t.lost), str(s.lost_steps), str(t.duplicated), str(s.duplicated_steps)]


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
    markdown: Path | None = typer.Option(None, help="append the table to this file"),
    warm_up: bool = typer.Option(True, help="a small level first, not reported"),
) -> None:
    if not console.is_terminal:
        console.width = max(console.width, 150)  # one line per row in a log
    console.print(describe_machine())
    opts = Options(steps=steps, policy_latency_ms=policy_latency_ms,
                   browser_step_ms=browser_step_ms, browsers=browsers,
                   policy_workers=policy_workers)
    levels = [int(x) for x in episodes.split(",") if x.strip()]
    base = get_settings()
    asyncio.run(stack.up(base, only=["kafka", "minio"]))
    results: list[Level] = []
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn()]
    with Progress(*columns, console=console) as progress:
        if warm_up:  # a fresh broker's JVM compiles its hot paths during the first requests
            asyncio.run(run_level(base, 4, replace(opts, steps=3), progress))
        for n in levels:
            results.append(asyncio.run(run_level(base, n, opts, progress)))
    title = (f"bus scale: synthetic browsers, teacher policy at {policy_latency_ms:.0f} ms, "
             f"{browser_step_ms:.0f} ms per browser step, {steps} steps/episode, "
             f"{browsers} browsers, {policy_workers} policy process(es)")
    table = Table(title=title)
    for col in COLUMNS:
        table.add_column(col, justify="right")
    rows = [row(level, opts) for level in results]
    for r in rows:
        table.add_row(*r)
    console.print(table)
    notes = []
    for level in results:
        assert level.tally is not None and level.step_count is not None
        notes.append(f"- {level.episodes}: {breakdown(level.parts_ms)}")
        notes.append(f"- {level.episodes}: bus p50 / p99 ms of step 0 (the policy reads its "
                     f"request first) {percentile(level.first_ms, 0.5):.0f} / "
                     f"{percentile(level.first_ms, 0.99):.0f}, of the later steps "
                     f"{percentile(level.later_ms, 0.5):.0f} / "
                     f"{percentile(level.later_ms, 0.99):.0f}")
        span = level.scored_s or level.wall_s
        notes.append(f"- {level.episodes}: CPU until all scored ({span:.1f} s): " + ", ".join(
            f"{n} {c:.1f} s ({c / span:.0%})" for n, c in level.cpu_s.items()))
        for note in delivery_notes(level.tally, level.step_count):
            notes.append(f"- {level.episodes}: {note}")
        if level.timeouts or level.wrong_actions:
            notes.append(f"- {level.episodes}: {level.timeouts} steps timed out waiting, "
                         f"{level.wrong_actions} actions not the reference's")
        if level.scored_s is None:
            notes.append(f"- {level.episodes}: not every episode scored in "
                         f"{opts.score_timeout_s:.0f}s (logs: {level.logs})")
    for note in notes:
        console.print(note)
    if markdown is not None:
        command = " ".join([".venv/bin/python -m bench.bus_scale", *sys.argv[1:]])
        text = markdown_table(title, command, COLUMNS, rows, "\n".join(notes),
                              when=datetime.now(UTC))
        append_markdown(markdown, text)
        console.print(f"appended to {markdown}")


if __name__ == "__main__":
    typer.run(main)
