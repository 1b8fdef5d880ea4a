"""Per-task and per-group outcomes of evaluations, and whether two versions differ.

An EvaluationResult is one rate; to tell versions apart it must be opened up. Each
episode it requested is one task outcome (success only for a judged success: a crash, a
cancel or a missing score fails, as the result counted it), grouped by MiniWoB++
environment or sandbox template (webgym_common.tasks.group_of), and marked novel when its
reference solution is no train task's (webgym_common.leaks.novel_solution: copying a train
solution cannot solve it). Two versions are compared on the
tasks both ran (paired on suite, split and task id) with McNemar's exact test, which
uses only the tasks exactly one of them solved: the held-out set is fixed, so the
pairing removes the task-to-task difference in hardness that two rates alone carry.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from producers.controller.iteration import task_id_of
from producers.controller.stats import McNemar, mcnemar
from webgym_common.events import EpisodeScored, EvaluationResult, Task
from webgym_common.history import is_judged, is_success
from webgym_common.leaks import novel_solution, train_solutions
from webgym_common.tasks import group_of

UNKNOWN_GROUP = "?"  # a task the catalog no longer holds


@dataclass(frozen=True)
class TaskOutcome:
    """One task of one evaluation (version -1: the scripted baseline)."""

    version: int
    suite: str
    split: str
    group: str
    task_id: str
    success: bool
    novel: bool = False  # its solution is no train task's (a task without a reference: not)


@dataclass(frozen=True)
class GroupRow:
    """One environment's or template's successes of one version on one suite and split."""

    version: int
    suite: str
    split: str
    group: str
    successes: int
    n: int

    @property
    def success_rate(self) -> float:
        return self.successes / self.n if self.n else 0.0


def task_outcomes(result: EvaluationResult, scored: Iterable[EpisodeScored],
                  tasks: Mapping[str, Task]) -> list[TaskOutcome]:
    """The result's episodes (episode_ids) as task outcomes, by task id; `scored` may hold
    other episodes too, `tasks` (task id -> Task) gives each its group."""
    by_id = {s.episode_id: s for s in scored}
    solutions = train_solutions(tasks.values())
    rows = []
    for eid in result.episode_ids:
        task_id = task_id_of(eid)
        s = by_id.get(eid)
        task = tasks.get(task_id)
        rows.append(TaskOutcome(
            version=result.version, suite=result.suite, split=result.split,
            group=group_of(task) if task is not None else UNKNOWN_GROUP, task_id=task_id,
            success=s is not None and is_judged(s) and is_success(s.reward),
            novel=task is not None and novel_solution(task, solutions)))
    return sorted(rows, key=lambda r: r.task_id)


def group_table(outcomes: Iterable[TaskOutcome]) -> list[GroupRow]:
    """Successes / tasks per (version, suite, split, group), by suite, split, group, version."""
    counts: dict[tuple[int, str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        c = counts[(o.version, o.suite, o.split, o.group)]
        c[0] += o.success
        c[1] += 1
    rows = [GroupRow(v, su, sp, g, k, n) for (v, su, sp, g), (k, n) in counts.items()]
    return sorted(rows, key=lambda r: (r.suite, r.split, r.group, r.version))


def _by_task(outcomes: Iterable[TaskOutcome]) -> dict[tuple[str, str, str], bool]:
    out: dict[tuple[str, str, str], bool] = {}
    for o in outcomes:
        key = (o.suite, o.split, o.task_id)
        if key in out:  # two runs of one task: which one pairs is not ours to guess
            raise ValueError(f"task {o.task_id} ({o.suite} {o.split}) appears twice for "
                             f"version {o.version}: compare one evaluation per version")
        out[key] = o.success
    return out


def paired(first: Iterable[TaskOutcome], second: Iterable[TaskOutcome],
           ) -> list[tuple[bool, bool]]:
    """(first's, second's) success on each task both ran (same suite, split and task id)."""
    a, b = _by_task(first), _by_task(second)
    return [(a[k], b[k]) for k in sorted(a.keys() & b.keys())]


def compare_versions(first: Iterable[TaskOutcome], second: Iterable[TaskOutcome]) -> McNemar:
    """McNemar's exact test on the tasks both versions ran: b tasks only `first` solved, c
    only `second`; p two-sided."""
    return mcnemar(paired(first, second))
