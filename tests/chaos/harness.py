"""The chaos harness: a real pipeline under load, a fault mid-iteration, outcomes from the topics.

Delivery semantics under test (shared/DESIGN.md): any process may be killed at any moment
and restarted without losing or double-counting an episode. A `Run` proves it end to end:

1. its own topic prefix on the shared embedded stack; `webgym topics create` and
   `webgym tasks load` as the user runs them;
2. every pipeline process (`webgym worker browser | policy --kind teacher | evaluator |
   history | metrics`) as a real child process; the teacher waits `teacher_delay_s` per
   decision so that many episodes are in flight;
3. one iteration driven by the real controller (`webgym rollout --split train
   --tasks-per-iteration 48 --iterations 1`), over tasks whose reference actions post
   forms, so a re-run action shows on the sandbox's per-episode post counter;
4. a fault (a coroutine given the Run) strikes at a seeded moment while episodes are in
   flight: SIGKILL and restart a process, add/stop workers, stop a dependency...;
5. every wait is bounded: an iteration that does not end in `bound_s` is cut short and what
   it left unfinished is reported as lost, never waited for;
6. the verdict is read from the topics themselves (webgym.episodes, .control,
   .episodes.completed, .episodes.scored, .task-history, .metrics, .dlq) with a plain
   consumer that dead-letters nothing, plus the sandbox's post counter (observe.py); the
   rules are harness/outcomes.py's. The scenario's tasks, options and settings: scenario.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.launch import PipelineProcess
from harness.outcomes import Moment, Observed, Tally, tally
from harness.topic_reads import raw_consumer, wait_partitions
from tests.chaos.observe import observe, sandbox_posts
from tests.chaos.scenario import Options, all_tasks, chaos_settings
from webgym_common.codec import Codec, DecodeError
from webgym_common.config import Settings, settings_env
from webgym_common.events import EpisodeCompleted
from webgym_common.lifecycle import READY_FILE_ENV
from webgym_common.topics import Topic, topic_name

log = logging.getLogger("chaos")

PIPELINE = ("browser", "policy", "evaluator", "history", "metrics")
READY_S = 150.0  # a process that is not serving by then is reported, not waited for
CLI_S = 120.0


class ChaosProcess(PipelineProcess):
    """A PipelineProcess started in the run's directory (faust keeps its data dir in the cwd)."""

    def __init__(self, settings: Settings, args: list[str], log_path: Path,
                 module: str = "webgym_cli", env: dict[str, str] | None = None) -> None:
        self.log_path = log_path
        self.ready_file = log_path.with_suffix(".ready")
        self.ready_file.unlink(missing_ok=True)
        env = {**os.environ, **(env or {}), **settings_env(settings),
               READY_FILE_ENV: str(self.ready_file)}
        self.log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "-v", *args], env=env, cwd=log_path.parent,
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def exited(self) -> int | None:
        return self.proc.poll()

    def log_tail(self, lines: int = 6) -> str:
        return " | ".join(self.log_text().strip().splitlines()[-lines:])


def args_for(kind: str, options: Options, contexts: int | None = None) -> list[str]:
    if kind == "browser":
        return ["worker", "browser", "--contexts", str(contexts or options.contexts)]
    if kind == "policy":
        return ["worker", "policy", "--kind", options.policy]
    if kind == "controller":
        return ["rollout", "--split", "train", "--tasks-per-iteration", str(options.episodes),
                "--iterations", "1"]
    return ["worker", kind]


Fault = Callable[["Run"], Coroutine[Any, Any, None]]


@dataclass
class Run:
    """One scenario: its settings, its processes, its fault, its verdict."""

    base: Settings
    workdir: Path
    scenario: str
    options: Options = field(default_factory=Options)
    settings: Settings = field(init=False)
    procs: dict[str, list[ChaosProcess]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    injected: set[tuple[str, int, int]] = field(default_factory=set)  # bad records we wrote
    allowed_dlq: int = 0
    extra_task_lines: list[str] = field(default_factory=list)  # malformed lines to load too
    # A kind run by a test double instead of the CLI (a module wrapping webgym_cli), and
    # environment every process gets (what such a double reads).
    modules: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    started_at: float = field(default_factory=time.monotonic)
    _completed: set[str] = field(default_factory=set)
    _watch: asyncio.Task | None = None
    _posts_before: tuple[dict[str, int], dict[str, int]] = ({}, {})
    _expected_exits: set[int] = field(default_factory=set)  # pids we killed or stopped
    stopped_by_itself: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.settings = chaos_settings(self.base, self.options)
        self.workdir.mkdir(parents=True, exist_ok=True)

    # -- processes -----------------------------------------------------------------------

    def start(self, kind: str, contexts: int | None = None) -> ChaosProcess:
        same = self.procs.setdefault(kind, [])
        p = ChaosProcess(self.settings, args_for(kind, self.options, contexts),
                         self.workdir / f"{kind}{len(same)}.log",
                         self.modules.get(kind, "webgym_cli"), self.env)
        same.append(p)
        return p

    def current(self, kind: str, index: int = -1) -> ChaosProcess:
        return self.procs[kind][index]

    def kill(self, kind: str, index: int = -1) -> ChaosProcess:
        p = self.current(kind, index)
        self._expected_exits.add(p.proc.pid)
        p.kill()
        self.note(f"SIGKILL {kind}#{self.procs[kind].index(p)}")
        return p

    async def terminate(self, kind: str, index: int = -1) -> ChaosProcess:
        p = self.current(kind, index)
        self._expected_exits.add(p.proc.pid)
        await asyncio.to_thread(p.stop, 30)
        self.note(f"SIGTERM {kind}#{self.procs[kind].index(p)} (exit {p.proc.returncode})")
        return p

    async def wait_ready(self, procs: list[ChaosProcess], timeout_s: float = READY_S) -> bool:
        """Wait until each process wrote its ready file (bounded); notes the ones that did not."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:  # noqa: ASYNC110 (ready files, with a bound)
            if all(p.is_ready() or p.exited() is not None for p in procs):
                break
            await asyncio.sleep(0.3)
        for p in procs:
            if p.exited() is not None:
                self.note(f"{p.log_path.stem} exited {p.exited()} while starting: "
                          f"{p.log_tail(3)}")
            elif not p.is_ready():
                self.note(f"{p.log_path.stem} not ready in {timeout_s:.0f}s: {p.log_tail(3)}")
        return all(p.is_ready() and p.exited() is None for p in procs)

    async def restart(self, kind: str, contexts: int | None = None) -> ChaosProcess:
        p = self.start(kind, contexts)
        if kind != "controller":
            await self.wait_ready([p])
        return p

    async def kill_and_restart(self, kind: str, pause_s: float = 0.0) -> None:
        self.kill(kind)
        await asyncio.sleep(pause_s)
        await self.restart(kind)

    def note(self, text: str) -> None:
        self.notes.append(f"[{time.monotonic() - self.started_at:5.1f}s] {text}")
        log.info("%s: %s", self.scenario, text)

    # -- set-up ---------------------------------------------------------------------------

    async def cli(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webgym_cli", *args, cwd=self.workdir,
            env={**os.environ, **settings_env(self.settings)},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), CLI_S)
        except TimeoutError:
            proc.kill()
            raise RuntimeError(f"webgym {' '.join(args)} did not finish in {CLI_S:.0f}s") from None
        if proc.returncode != 0:
            raise RuntimeError(f"webgym {' '.join(args)} failed: {out.decode()[-800:]}")
        return out.decode()

    def write_tasks(self, path: Path) -> Path:
        tasks = all_tasks()
        lines = [json.dumps(tasks[t]) for t in self.options.tasks] + self.extra_task_lines
        path.write_text("".join(line + "\n" for line in lines))
        return path

    async def setup(self) -> bool:
        """Topics, tasks and every pipeline process serving; False (with notes) if not."""
        await self.cli("topics", "create")
        out = await self.cli("tasks", "load", str(self.write_tasks(self.workdir / "tasks.jsonl")))
        if self.extra_task_lines:
            self.note("tasks load: " + " | ".join(out.strip().splitlines()[-4:]))
        kinds = (*PIPELINE, "replay") if self.options.replay else PIPELINE
        started = [self.start(kind) for kind in kinds]
        ok = await self.wait_ready(started)
        self._watch = asyncio.create_task(self._watch_completed())
        self._posts_before = await sandbox_posts(self.settings) or ({}, {})
        self.started_at = time.monotonic()
        return ok

    async def teardown(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watch
        everything = [p for ps in self.procs.values() for p in ps]
        await asyncio.gather(*(asyncio.to_thread(p.stop, 20) for p in everything))

    # -- progress (for striking at a moment) -------------------------------------------

    async def _watch_completed(self) -> None:
        """Follow webgym.episodes.completed: which episodes have ended so far."""
        codec = Codec()
        name = topic_name(self.settings.kafka, Topic.EPISODES_COMPLETED)
        consumer = raw_consumer(self.settings, "chaos-watch")
        await consumer.start()
        try:
            parts = await wait_partitions(consumer, name)
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            while True:
                try:
                    batches = await consumer.getmany(timeout_ms=500)
                except Exception as err:  # the broker down for a while: keep following
                    log.info("watch: %r", err)
                    await asyncio.sleep(1)
                    continue
                for records in batches.values():
                    for r in records:
                        with contextlib.suppress(DecodeError):
                            ev = codec.decode(r.value)
                            if isinstance(ev, EpisodeCompleted):
                                self._completed.add(ev.episode_id)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), 10)

    @property
    def completed(self) -> int:
        return len(self._completed)

    async def until(self, at: Moment, timeout_s: float = 240.0) -> None:
        """Wait for the moment (bounded: strike anyway, with a note, when it does not come)."""
        deadline = time.monotonic() + timeout_s
        while self.completed < at.after_completed and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.2)  # (polls the watcher's count, with a bound)
        if self.completed < at.after_completed:
            self.note(f"moment '{at}' never came ({self.completed} completed): striking now")
        await asyncio.sleep(at.extra_s)
        self.note(f"strike at {self.completed} completed")

    # -- the iteration ------------------------------------------------------------------

    async def iterate(self, fault: Fault | None) -> Tally:
        """Run one iteration with the fault striking during it; the verdict from the topics."""
        self.start("controller")
        strike: asyncio.Task[None] | None = asyncio.create_task(fault(self)) if fault else None
        deadline = time.monotonic() + self.options.bound_s
        while time.monotonic() < deadline:
            controller = self.current("controller")
            if controller.exited() is not None and (strike is None or strike.done()):
                break
            await asyncio.sleep(0.5)
        else:
            self.note(f"the iteration did not end within {self.options.bound_s:.0f}s; "
                      f"{self.completed} episodes completed")
        if strike is not None:
            if not strike.done():
                strike.cancel()
                self.note("the fault was still running at the bound")
            elif not strike.cancelled() and strike.exception() is not None:
                self.note(f"the fault failed: {strike.exception()!r}")
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await strike
        controller = self.current("controller")
        if controller.exited() is None:
            controller.kill()
        elif controller.exited() != 0:
            self.note(f"controller exited {controller.exited()}: {controller.log_tail(3)}")
        observed = await self.settle()
        self.check_processes()
        t = tally(self.scenario, observed, self.allowed_dlq)
        t.seconds = time.monotonic() - self.started_at
        t.notes = self.notes + t.notes
        return t

    async def settle(self) -> Observed:
        """Read the topics until the scores, history and DLQ stop moving (bounded)."""
        deadline = time.monotonic() + self.options.settle_s
        last: tuple | None = None
        while True:
            try:
                observed = await self.observe()
            except Exception as err:  # the broker may still be coming back
                if time.monotonic() > deadline:
                    raise
                self.note(f"reading the topics failed ({err!r}); retrying")
                await asyncio.sleep(3)
                continue
            attempts = sum(observed.history.get(t, (0, []))[0] for t in self.options.tasks)
            scored = sum(1 for e in observed.scored_task if e in observed.episode_task)
            now = (scored, attempts, len(observed.dlq),
                   sum(map(len, observed.completed.values())))
            if (now == last and attempts == scored) or time.monotonic() > deadline:
                return observed
            last = now
            await asyncio.sleep(3)

    def check_processes(self) -> None:
        """No process may stop by itself (the ones the fault killed or stopped excepted)."""
        for kind, procs in self.procs.items():
            for p in procs:
                code = p.exited()
                if kind != "controller" and code is not None and (
                        p.proc.pid not in self._expected_exits):
                    self.note(f"{kind} {p.log_path.stem} stopped by itself (exit {code}): "
                              f"{p.log_tail(3)}")
                    self.stopped_by_itself.append(p.log_path.stem)

    async def observe(self) -> Observed:
        return await observe(self.settings, self.options, self.injected, self._posts_before)


# -- a whole scenario -----------------------------------------------------------------

RESULTS: list[Tally] = []  # every scenario of the session, for the table at the end


async def play(run: Run, fault: Fault | None) -> Tally:
    """Set up, run the iteration with the fault, tear down; the row is recorded either way."""
    n = run.options.episodes
    result = Tally(run.scenario, n, n, 0, 0, Counter(), 0)  # until proven otherwise: all lost
    try:
        if await run.setup():
            result = await run.iterate(fault)
        else:
            result.notes = [*run.notes, "the pipeline did not start: nothing ran"]
    except Exception as err:
        result.notes = [*run.notes, f"harness error: {err!r}"]
        raise
    finally:
        await run.teardown()
        RESULTS.append(result)
    return result


def verdict(t: Tally, run: Run) -> str:
    """Everything a failed assertion should say about the scenario."""
    return "\n".join([f"{t.scenario}: {t.episodes} episodes, {t.lost} lost, {t.duplicated} "
                      f"duplicated, {t.wrong} wrong, dlq {t.dlq}, ended early "
                      f"{dict(t.ended_early)}", *t.notes, f"logs: {run.workdir}",
                      *trail(run.workdir, " ".join(t.notes))])


def trail(workdir: Path, notes: str, episodes: int = 2, lines: int = 8) -> list[str]:
    """The last log lines of each process about the first episodes a note names: the
    logs themselves stay on the machine that ran the test (CI keeps only its output)."""
    out = []
    for eid in list(dict.fromkeys(re.findall(r"\btrain-it\d+-\d+-[\w-]+", notes)))[:episodes]:
        for log_file in sorted(workdir.glob("*.log")):
            text = log_file.read_text(errors="replace").splitlines()
            if hits := [line[:240] for line in text if eid in line][-lines:]:
                out += [f"{log_file.name} on {eid}:", *(f"  {h}" for h in hits)]
    return out


def assert_exactly_once(t: Tally, run: Run) -> None:
    """The contract: nothing lost, nothing twice, nothing wrong, no process stopped."""
    assert t.episodes >= run.options.episodes, verdict(t, run)
    assert (t.lost, t.duplicated, t.wrong) == (0, 0, 0), verdict(t, run)
    assert t.dlq == 0, verdict(t, run)
    assert not run.stopped_by_itself, verdict(t, run)
