"""The trainer's decisions: its state folded from the log, and which run (if any) comes next.

Pure. The state is four topics read from their beginnings: webgym.replay (samples by id,
the first copy wins: the replay processor may publish a sample twice under its id),
webgym.control (closed iterations), webgym.models (the versions published so far: the
last one is the parent of the next, and its `trained_on_iterations` / `metrics` say how far
training got) and webgym.tasks (the catalog, for the leak guard). Nothing else is
remembered, so a restarted trainer decides the same way.

Triggers (settings.trainer.trigger):
- sync (WebGym): the oldest closed iteration past the newest iteration a version was trained
  on. Version i+1 follows iteration i, so every closed iteration gets a version, whatever its
  split: the controller runs iteration i on version i - k. A test iteration adds no training
  samples: its version is its parent's weights (an empty run, below). The caller first waits
  until the replay processor has read the scored episodes up to the close (`caught_up`).
- async (AReaL / AsyncWebRL): at least `every_samples` samples fresh enough to train on
  arrived after the last version's pool (its metrics' `pool_end_ms`; older versions: its
  publication time). The pool stops at the `every_samples`-th of them, so a restart that
  finds more samples in the log still draws from the same pool.

A planned run draws, from the eligible samples in order (iteration, produced_at, sample id:
a total order the log fixes, whichever partition is read first), WebGym's recency-biased
draw (consumers.trainer.draw) seeded by the version number. Eligible: train split, a task
the leak guard lets train (webgym_common.leaks, over the catalog: the last check before a
row reaches a dataset, whatever wrote the replay topic), in the window (the last N
iterations up to the trigger's, the newest `capacity`), fresh enough for
`max_staleness`, and a success unless the run's objective learns from failures (KTO/DPO)
or the replay keeps failures for SFT too (`replay.success_only` off).

A run's objective (`objective`): `trainer.mode`, except that the warm start is supervised. A
preference objective (KTO, DPO) needs a model that already acts to compare its successes with
its failures, and the bank holds successes only, so under a preference mode the first run from
the base model (with `warm_start` on) and the bank-only control are SFT (LoRA, or full with
full SFT) on successes; the versions after the warm start train with the preference objective.

The demonstration bank (webgym_common.demonstrations: teacher-forced episodes of the train
split's references, iteration -2) is no iteration's and outside every window: the first run
from the base model trains on all of it (the supervised warm start, `trainer.warm_start`),
later runs draw from it so that it makes `trainer.demonstration_share` of their rows
(`bank_draw`, seeded by the version like the replay draw). It never triggers a run.

The bank-only control (`control_run`, webgym curve's matched control) continues the warm
start's adapter (v1) on every bank sample the guard lets train, for as many steps as the
policy's versions after the warm start were trained in all (`steps_after_warm_start`), in a
model line of its own (webgym_common.versions.control_model): what more passes over the bank
give, beside what the policy's own experience gave.

An empty run (a sync close with no eligible sample: the small policy often succeeds nowhere
early on, or a test iteration) is not skipped, or the synchronous loop would wait forever for
its version: the version is published with its parent's checkpoint and metrics
{"samples": 0}. An async trigger never plans an empty run (it counts eligible samples).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from aiokafka import TopicPartition

from consumers.trainer.draw import draw, fresh_enough, window
from consumers.trainer.llamafactory import run_id
from webgym_common.choices import TrainMode, TrainTrigger
from webgym_common.config import Settings, TrainerSettings
from webgym_common.demonstrations import is_bank_sample
from webgym_common.events import (
    IterationClosed,
    ModelVersion,
    ReplaySample,
    Task,
    TrainingProgress,
)
from webgym_common.leaks import LeakGuard
from webgym_common.stream.bus import Received

POOL_END = "pool_end_ms"  # ModelVersion.metrics: the newest sample time of the run's pool


@dataclass(frozen=True)
class Seen:
    """A replay sample where the log has its first copy."""

    sample: ReplaySample
    partition: int
    offset: int

    @property
    def iteration(self) -> int:
        return self.sample.iteration

    @property
    def at_ms(self) -> int:
        return int(self.sample.produced_at.timestamp() * 1000)

    @property
    def order(self) -> tuple[int, int, str]:
        return self.sample.iteration, self.at_ms, self.sample.sample_id


@dataclass
class TrainerState:
    model_name: str
    samples: dict[str, Seen] = field(default_factory=dict)
    closed: dict[int, IterationClosed] = field(default_factory=dict)
    versions: dict[int, ModelVersion] = field(default_factory=dict)
    catalog: dict[str, Task] = field(default_factory=dict)


@dataclass(frozen=True)
class PlannedRun:
    version: int
    parent_version: int
    run_id: str
    sample_ids: tuple[str, ...]  # in draw order
    trained_on_iterations: tuple[int, ...]
    pool: int  # eligible samples drawn from
    pool_end_ms: int
    trigger: str = field(default="", compare=False)  # why, for the log
    mode: TrainMode = TrainMode.LORA_SFT  # the run's objective (`objective`)

    @property
    def empty(self) -> bool:
        return not self.sample_ids


def fold(state: TrainerState, received: Received) -> TrainerState:
    """`state` (updated in place: it holds every sample) with one event of the three topics."""
    e = received.event
    if isinstance(e, ReplaySample):
        state.samples.setdefault(e.sample_id, Seen(e, received.partition, received.offset))
    elif isinstance(e, IterationClosed):
        state.closed.setdefault(e.iteration, e)
    elif isinstance(e, ModelVersion) and e.model_name == state.model_name:
        state.versions.setdefault(e.version, e)
    elif isinstance(e, Task):
        state.catalog[e.task_id] = e  # compacted: the latest line of a task wins
    return state


def last_version(state: TrainerState) -> int:
    return max(state.versions, default=0)


def trained_through(state: TrainerState) -> int:
    """The newest iteration any version was trained on (-1: none yet)."""
    return max((i for v in state.versions.values() for i in v.trained_on_iterations),
               default=-1)


def pending_iteration(state: TrainerState) -> int | None:
    """Sync: the oldest closed iteration no version has followed yet."""
    done = trained_through(state)
    return min((i for i in state.closed if i > done), default=None)


def already_published(state: TrainerState, run: str) -> bool:
    return any(v.run_id == run for v in state.versions.values())


def caught_up(committed: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]) -> bool:
    """Has a group committed every partition up to the ends the log had (an empty one counts)?"""
    return all(end <= 0 or committed.get(tp, 0) >= end for tp, end in ends.items())


def pool_end(version: ModelVersion | None) -> int:
    if version is None:
        return -1
    end = version.metrics.get(POOL_END)
    return int(end) if end is not None else int(version.produced_at.timestamp() * 1000)


def supervised(mode: TrainMode) -> TrainMode:
    """The supervised objective beside `mode`: full SFT stays full, the rest LoRA SFT."""
    return mode if mode is TrainMode.FULL_SFT else TrainMode.LORA_SFT


def objective(cfg: TrainerSettings, parent: int) -> TrainMode:
    """What the successor of version `parent` trains with (see the module docstring)."""
    return supervised(cfg.mode) if parent == 0 and cfg.warm_start else cfg.mode


def usable(sample: ReplaySample, settings: Settings, current_version: int,
           guard: LeakGuard, mode: TrainMode | None = None) -> bool:
    """Could this sample train the successor of `current_version` (window aside), with the
    objective `mode` (default: the successor's `objective`)?"""
    mode = mode or objective(settings.trainer, current_version)
    learns_failures = mode.needs_failures or not settings.replay.success_only
    return (sample.split == "train" and (sample.success or learns_failures)
            and fresh_enough(sample.policy_version, current_version,
                             settings.trainer.max_staleness)
            and guard.trainable(sample.task_id))


def bank_draw(bank: list[Seen], policy_rows: int, parent: int, cfg: TrainerSettings,
              samples_per_run: int) -> list[Seen]:
    """The demonstration bank's samples a run trains on beside its `policy_rows` drawn ones:
    all of them for the warm start (the first run from the base model), else a uniform draw
    seeded by the version: `demonstration_share` of the run's rows, the run counted as at
    least `samples_per_run` rows (a run of a few policy successes keeps rehearsing the
    bank instead of repeating those few for all its steps)."""
    share, warm = cfg.demonstration_share, parent == 0 and cfg.warm_start
    if warm or not bank:
        return bank
    if share == 0:
        return []
    wanted = math.ceil(max(policy_rows / (1 - share), samples_per_run) * share)
    return draw(bank, wanted, 1.0, seed=parent + 1)


def next_run(state: TrainerState, settings: Settings) -> PlannedRun | None:
    """The run to do now, or None (see the module docstring)."""
    parent = last_version(state)
    guard = LeakGuard.of(state.catalog)
    usable_samples = [s for s in state.samples.values()
                      if usable(s.sample, settings, parent, guard)]
    ordered = sorted((s for s in usable_samples if not is_bank_sample(s.iteration)),
                     key=lambda s: s.order)
    bank = sorted((s for s in usable_samples if is_bank_sample(s.iteration)),
                  key=lambda s: s.order)
    if settings.trainer.trigger is TrainTrigger.SYNC:
        iteration = pending_iteration(state)
        if iteration is None:
            return None
        closed = state.closed[iteration]
        if closed.split != "train":  # a test iteration trains on nothing, not even the bank
            bank = []
        pool = [] if closed.split != "train" else [s for s in ordered
                                                    if s.sample.iteration <= iteration]
        trigger = f"iteration {iteration} ({closed.split}) closed"
    else:
        start = pool_end(state.versions.get(parent))
        new = sorted((s for s in ordered if s.at_ms > start), key=lambda s: (s.at_ms, s.order))
        if len(new) < settings.trainer.every_samples:
            return None
        end_ms = new[settings.trainer.every_samples - 1].at_ms
        pool = [s for s in ordered if s.at_ms <= end_ms]
        iteration = max(s.sample.iteration for s in pool)
        trigger = f"{len(new)} new samples since v{parent}"
    r = settings.replay
    eligible = window(pool, iteration, r.window_iterations, r.capacity)
    drawn = draw(eligible, r.samples_per_run, r.recency_power, seed=parent + 1)
    demos = bank_draw(bank, len(drawn), parent, settings.trainer, r.samples_per_run)
    ids = tuple(s.sample.sample_id for s in [*drawn, *demos])
    iterations = {s.sample.iteration for s in drawn}
    if settings.trainer.trigger is TrainTrigger.SYNC:
        iterations.add(iteration)  # followed, even with nothing to train on
    if demos:
        trigger += f"; {len(demos)} demonstration-bank rows"
    mode = objective(settings.trainer, parent)
    return PlannedRun(
        version=parent + 1, parent_version=parent,
        run_id=run_id(ids, parent, mode), sample_ids=ids,
        trained_on_iterations=tuple(sorted(iterations)), pool=len(eligible),
        pool_end_ms=max((s.at_ms for s in pool), default=pool_end(state.versions.get(parent))),
        trigger=trigger, mode=mode)


def passthrough(parent: ModelVersion | None, run: PlannedRun, model_name: str, base_model: str,
                mode: str, finetuning_type: str) -> ModelVersion:
    """An empty run's version: the parent's weights under the next number (base: no
    checkpoint, the model server's base model)."""
    return ModelVersion(
        model_name=model_name, version=run.version,
        checkpoint_uri=parent.checkpoint_uri if parent is not None else "",
        file_sha256=dict(parent.file_sha256) if parent is not None else {},
        base_model=parent.base_model if parent is not None else base_model,
        finetuning_type=parent.finetuning_type if parent is not None else finetuning_type,
        trained_on_iterations=list(run.trained_on_iterations),
        metrics={"samples": 0.0, POOL_END: float(run.pool_end_ms)},
        run_id=run.run_id, parent_version=run.parent_version, sample_ids=[], mode=mode)


def trained_version(run: PlannedRun, cfg: TrainerSettings, checkpoint_uri: str, base_model: str,
                    rows: int, metrics: Mapping[str, float],
                    file_sha256: Mapping[str, str]) -> ModelVersion:
    """The ModelVersion of a finished run whose files, with these digests, are under
    `checkpoint_uri`."""
    return ModelVersion(
        model_name=cfg.model_name, version=run.version, checkpoint_uri=checkpoint_uri,
        file_sha256=dict(file_sha256),
        base_model=base_model, finetuning_type=run.mode.finetuning_type,
        trained_on_iterations=list(run.trained_on_iterations),
        metrics={**metrics, "samples": float(rows), POOL_END: float(run.pool_end_ms)},
        run_id=run.run_id, parent_version=run.parent_version, sample_ids=list(run.sample_ids),
        mode=run.mode.value)


WARM_START_VERSION = 1


def steps_after_warm_start(progress: Iterable[TrainingProgress]) -> int:
    """The LoRA steps the versions after the warm start were trained for, in all, from the
    runs' finished progress (webgym.training keeps every run; webgym.models, compacted by
    model name, may hold only the newest version). A run finished twice counts once."""
    steps = {p.version: p.step for p in progress
             if p.state == "finished" and p.version > WARM_START_VERSION}
    return sum(steps.values())


def control_run(state: TrainerState, settings: Settings) -> PlannedRun:
    """The control's v1: every usable bank sample, on the warm start's adapter, supervised
    (the bank holds successes only: a preference objective would have nothing to compare)."""
    guard, mode = LeakGuard.of(state.catalog), supervised(settings.trainer.mode)
    bank = sorted((s for s in state.samples.values() if is_bank_sample(s.iteration)
                   and usable(s.sample, settings, WARM_START_VERSION, guard, mode)),
                  key=lambda s: s.order)
    ids = tuple(s.sample.sample_id for s in bank)
    return PlannedRun(
        version=1, parent_version=WARM_START_VERSION,
        run_id=run_id([f"control:{i}" for i in ids], WARM_START_VERSION, mode),
        sample_ids=ids, trained_on_iterations=(), pool=len(ids),
        pool_end_ms=max((s.at_ms for s in bank), default=0),
        trigger=f"the bank-only control: {len(ids)} bank rows on v{WARM_START_VERSION}",
        mode=mode)
