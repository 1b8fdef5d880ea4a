"""`webgym eval`: one model version on one suite's test split, measured and published.

Delivery: like an iteration, everything is in the log and publishing again is safe. The
episodes are the split's tasks of the suite (all; a draw of `limit` seeded by `seed`; or
the stratified held-out set of `per_group` tasks per environment or template, heldout.py),
with ids that name the version, suite, split, seed and per-group count, so a killed
evaluation run again with the same arguments finds its requests on webgym.episodes and
sends only the missing ones; completions and scores are re-read from their topics. The
result goes to the compacted webgym.evaluations under `evaluation_key`: a re-run publishes
the same numbers again.

The scripted baseline (processors.policy.baseline: it clicks the marks in order, then
answers) is evaluated as version BASELINE_EVAL_VERSION (-1): its episodes are requested on
the tag "baseline", its key and ids say "baseline", and its EvaluationResult has version -1
(no model version is negative), so a curve tells it from the models.

An evaluation is not an iteration: it publishes no IterationStarted/Closed (the trainer
makes a version per closed iteration) and its episodes carry iteration -1, so they count
in no iteration's metrics. Test and ood episodes never feed replay (processors.replay_
decisions) and the policy decides them on exactly the requested version, at the
evaluation temperature and seed (processors.policy.policies.VllmPolicy.choice).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from producers.catalog import load_task_catalog
from producers.controller.heldout import per_group_for, stratified_tasks
from producers.controller.iteration import IterationState, Pending
from producers.controller.rollout import follow, requests_outside_iterations
from producers.controller.stats import wilson_interval
from webgym_common.choices import Split, Suite
from webgym_common.config import Settings
from webgym_common.events import EpisodeRequested, EpisodeScored, EvaluationResult, Task, utc_now
from webgym_common.history import is_judged, is_success
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.readers import read_compacted
from webgym_common.tasks import in_split, in_suite, step_limit
from webgym_common.topics import Topic
from webgym_common.versions import (
    BASELINE_VERSION,
    CONTROL_EVAL_OFFSET,
    CONTROL_LINE,
    control_tag,
    is_control_eval,
    version_tag,
)

EVAL_ITERATION = -1  # an evaluation episode belongs to no training iteration
# The scripted baseline's version in keys and EvaluationResult.version (never a model's).
BASELINE_EVAL_VERSION = -1


# -- decisions (pure) ------------------------------------------------------------------


def is_evaluation_task(task: Task, suite: Suite, split: Split) -> bool:
    """Of the suite and marked for `split` (a task without a split is in none)."""
    return in_suite(task, suite) and in_split(task, split)


def evaluation_tasks(catalog: Iterable[Task], suite: Suite, split: Split, limit: int | None,
                     seed: int, per_group: int | None = None) -> list[Task]:
    """The suite's tasks for `split` (is_evaluation_task), by id; with `limit`, a draw of that
    many seeded by `seed` (the same every time); with `per_group`, the stratified held-out
    set (heldout.stratified_tasks). Not both: they are two different selections."""
    if per_group is not None:
        if limit is not None:
            raise ValueError("choose either a limit or a per-group count, not both")
        return stratified_tasks(catalog, suite, split, per_group, seed)
    pool = sorted((t for t in catalog if is_evaluation_task(t, suite, split)),
                  key=lambda t: t.task_id)
    if limit is not None and len(pool) > limit:
        pool = sorted(random.Random(seed).sample(pool, limit), key=lambda t: t.task_id)
    return pool


def selection_tag(seed: int, per_group: int | None = None) -> str:
    """The seed part of keys and ids: "s<seed>", "s<seed>g<K>" for the held-out set of K per
    group (a draw and a full split keep the tag they always had, so old runs resume)."""
    return f"s{seed}" if per_group is None else f"s{seed}g{per_group}"


def requested_tag(version: int) -> str:
    """The policy_version an evaluation's episodes are requested on."""
    if is_control_eval(version):
        return control_tag(version - CONTROL_EVAL_OFFSET)
    return BASELINE_VERSION if version == BASELINE_EVAL_VERSION else version_tag(version)


def version_label(version: int) -> str:
    """How keys, tables and curves name a version: "v<N>", "baseline" or "control-v<N>"."""
    if is_control_eval(version):
        return control_tag(version - CONTROL_EVAL_OFFSET)
    return BASELINE_VERSION if version == BASELINE_EVAL_VERSION else f"v{version}"


def version_cell(version: int) -> str:
    """A version as episode ids and the CSVs write it: the number, "baseline" or
    "control<N>" (one "-"-free word, so not "-1")."""
    if is_control_eval(version):
        return f"{CONTROL_LINE}{version - CONTROL_EVAL_OFFSET}"
    return BASELINE_VERSION if version == BASELINE_EVAL_VERSION else str(version)


def evaluation_key(model_name: str, version: int, suite: Suite, split: Split, seed: int,
                   per_group: int | None = None) -> str:
    return (f"{model_name}:{version_label(version)}:{suite}:{split}:"
            f"{selection_tag(seed, per_group)}")


def evaluation_episode_id(split: Split, version: int, suite: Suite, seed: int, index: int,
                          task_id: str, per_group: int | None = None) -> str:
    # split first, as an iteration's ids: one "-"-free word, then the run, index and task
    return (f"{split}-eval{version_cell(version)}{suite}{selection_tag(seed, per_group)}-"
            f"{index:04d}-{task_id}")


def evaluation_request(settings: Settings, eid: str, task: Task, split: Split, version: int,
                       max_steps: int | None) -> EpisodeRequested:
    """An evaluation episode: the task's own step limit (else WebGym's test limit), capped."""
    return EpisodeRequested(
        episode_id=eid, task=task, iteration=EVAL_ITERATION, split=split,
        max_steps=step_limit(task, split, max_steps),
        deadline=utc_now() + timedelta(minutes=settings.rollout.eval_timeout_minutes),
        policy_version=requested_tag(version), interaction_mode=settings.rollout.interaction_mode,
    )


def evaluation_result(settings: Settings, version: int, suite: Suite, split: Split, seed: int,
                      state: IterationState, wall_time_s: float) -> EvaluationResult:
    """Success over every episode requested: a crash, a cancel or a missing score fails."""
    judged: list[EpisodeScored] = [s for s in state.scored.values() if is_judged(s)]
    successes = sum(is_success(s.reward) for s in judged)
    n = len(state.requests)
    low, high = wilson_interval(successes, n)
    return EvaluationResult(
        model_name=settings.trainer.model_name, version=version, suite=suite, split=split,
        seed=seed, temperature=settings.policy.eval_temperature, episodes=n,
        scored=len(judged), successes=successes, success_rate=successes / n if n else 0.0,
        ci_low=low, ci_high=high,
        avg_steps=sum(s.steps for s in judged) / len(judged) if judged else 0.0,
        episode_ids=sorted(state.requests), wall_time_s=wall_time_s,
    )


# -- the run --------------------------------------------------------------------------


async def evaluate(settings: Settings, producer: EventProducer, version: int, suite: Suite,
                   split: Split, catalog: Iterable[Task],
                   requested: Mapping[str, EpisodeRequested], *, limit: int | None = None,
                   seed: int = 0, per_group: int | None = None,
                   max_steps: int | None = None,
                   on_update: Callable[[IterationState], None] = lambda s: None,
                   ) -> EvaluationResult:
    """Request (or resume) the evaluation's episodes, follow them to their scores, publish."""
    started = time.monotonic()
    tasks = evaluation_tasks(catalog, suite, split, limit, seed, per_group)
    if not tasks:
        raise ValueError(f"no {split} tasks of suite {suite} in the catalog: load a task file "
                         "with splits (webgym tasks load ...)")
    ids = {evaluation_episode_id(split, version, suite, seed, i, t.task_id, per_group): t
           for i, t in enumerate(tasks)}
    state = IterationState(EVAL_ITERATION, split)
    state.requests.update({eid: requested[eid] for eid in ids if eid in requested})
    for eid, task in ids.items():
        if eid not in state.requests:
            req = evaluation_request(settings, eid, task, split, version, max_steps)
            # requested by `follow`, a window at a time, the deadline counted from then
            state.pending[eid] = Pending(
                req, timedelta(minutes=settings.rollout.eval_timeout_minutes))
    await follow(settings, producer, state, on_update)
    result = evaluation_result(settings, version, suite, split, seed, state,
                               time.monotonic() - started)
    await producer.publish(Topic.EVALUATIONS,
                           evaluation_key(result.model_name, version, suite, split, seed,
                                          per_group), result)
    return result


def evaluation_runs(catalog: Iterable[Task], suite: Suite, splits: Sequence[Split],
                    ) -> list[tuple[Suite, Split]]:
    """(suite, split) pairs to evaluate: the suite given, or with ALL each suite that has
    tasks of the split."""
    tasks = list(catalog)
    suites = [suite] if suite != Suite.ALL else [s for s in Suite if s != Suite.ALL]
    return [(s, sp) for s in suites for sp in splits
            if suite != Suite.ALL or any(is_evaluation_task(t, s, sp) for t in tasks)]


async def evaluate_version(settings: Settings, producer: EventProducer, version: int,
                           suite: Suite, splits: Sequence[Split], console: Console, *,
                           limit: int | None = None, seed: int = 0,
                           per_group: int | Mapping[Suite, int] | None = None,
                           max_steps: int | None = None, skip_published: bool = False,
                           ) -> list[EvaluationResult]:
    """Every (suite, split) run of one version (BASELINE_EVAL_VERSION: the scripted
    baseline) with a live bar each. `per_group`: the stratified held-out set, one count
    for every suite or one per suite (heldout.HELDOUT_PER_GROUP). `skip_published`: a
    run whose result webgym.evaluations holds already is taken from there (the loop's
    periodic evaluation, resumed after a restart)."""
    catalog = list((await load_task_catalog(settings, producer)).values())
    runs = evaluation_runs(catalog, suite, splits)
    if not runs:
        raise ValueError("no test tasks in the catalog: load a task file with splits "
                         "(webgym tasks load ...)")
    done = await read_compacted(settings, Topic.EVALUATIONS, producer) if skip_published else {}
    requested = await requests_outside_iterations(settings, producer, EVAL_ITERATION)
    results = []
    who = version_label(version)
    for s, sp in runs:
        k = None if per_group is None else per_group_for(per_group, s)
        key = evaluation_key(settings.trainer.model_name, version, s, sp, seed, k)
        if isinstance(earlier := done.get(key), EvaluationResult):
            results.append(earlier)
            continue
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console) as progress:
            bar = progress.add_task(f"eval {who} {s} {sp}", total=None)

            def update(state: IterationState, bar: TaskID = bar,
                       label: str = f"{who} {s} {sp}") -> None:
                progress.update(bar, completed=len(state.completed), total=state.total,
                                description=f"eval {label}: running "
                                f"{state.running} · scored {len(state.scored)}")

            results.append(await evaluate(settings, producer, version, s, sp, catalog,
                                          requested, limit=limit, seed=seed, per_group=k,
                                          max_steps=max_steps, on_update=update))
    print_results(results, console)
    return results


def result_rows(results: Sequence[EvaluationResult]) -> list[tuple[str, ...]]:
    """Table rows: version, suite, split, successes/episodes, rate and its interval."""
    return [(version_label(r.version), r.suite, r.split, f"{r.successes}/{r.episodes}",
             f"{r.success_rate:.1%}", f"[{r.ci_low:.1%}, {r.ci_high:.1%}]",
             f"{r.avg_steps:.1f}", f"{r.wall_time_s:.0f}s") for r in results]


def print_results(results: Sequence[EvaluationResult], console: Console) -> None:
    table = Table(title="evaluation (success over every episode requested; 95 % Wilson "
                  "interval)")
    for col in ("version", "suite", "split", "solved", "success", "95% interval", "avg steps",
                "time"):
        table.add_column(col)
    for row in result_rows(results):
        table.add_row(*row)
    console.print(table)
