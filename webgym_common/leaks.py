"""The leak guard: may a task's episodes become training rows? One answer for every path.

Every way into a LoRA run asks the same `LeakGuard`, built from the task catalog: the
demonstration bank (which tasks are teacher-forced), the sampler (which train tasks an
iteration draws), the replay processor (which scored episodes become ReplaySamples) and the
trainer (which samples a run's dataset holds). A task may train only when it is of the
train split and shares no mark with a held-out task (validation, test or ood):

- its task id;
- its MiniWoB++ environment and seed;
- its template and one of its entities (the sandbox's generated and hand-written tasks);
- its solution: the reference action sequence, canonical (a train task whose reference
  equals a held-out task's would teach the held-out answer under another id);
- its group, when the group is held out whole (ood environments and templates).

A task without a split, or one the catalog does not know, never trains. `novel_solution`
says which held-out tasks a training split could not have taught by copying: reports give
those their own column.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from webgym_common.choices import Split
from webgym_common.events import Task
from webgym_common.tasks import entities_of, group_of

HELD_OUT_SPLITS = frozenset({Split.TEST, Split.OOD, Split.VALIDATION})


def solution_of(task: Task) -> str | None:
    """The task's reference action sequence as one canonical string (None: it has none)."""
    if not task.reference_actions:
        return None
    steps = [a.model_dump(mode="json", exclude_none=True) for a in task.reference_actions]
    return json.dumps(steps, sort_keys=True, separators=(",", ":"))


def marks_of(task: Task) -> set[str]:
    """What a training task must not share with a held-out one."""
    marks = {f"id:{task.task_id}"}
    if (env := task.environment) is not None:
        marks.add(f"env:{env.name}:seed:{env.seed}")
    marks.update(f"entity:{group_of(task)}:{e}" for e in entities_of(task))
    if (solution := solution_of(task)) is not None:
        marks.add(f"solution:{solution}")
    return marks


def _short(mark: str, width: int = 90) -> str:
    return mark if len(mark) <= width else mark[:width - 1] + "…"


@dataclass(frozen=True)
class LeakGuard:
    """The held-out side of a catalog, and the verdict on any task id against it."""

    catalog: Mapping[str, Task]
    held_out_marks: frozenset[str]
    held_out_groups: frozenset[str]  # held out whole (ood)
    # the verdict per task id, made once: the trainer asks it for every sample of a task
    _verdicts: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, catalog: Iterable[Task] | Mapping[str, Task]) -> LeakGuard:
        tasks = list(catalog.values()) if isinstance(catalog, Mapping) else list(catalog)
        held = [t for t in tasks if t.split in HELD_OUT_SPLITS]
        return cls(catalog={t.task_id: t for t in tasks},
                   held_out_marks=frozenset().union(*(marks_of(t) for t in held)),
                   held_out_groups=frozenset(group_of(t) for t in held if t.split == Split.OOD))

    def reasons(self, task_id: str) -> list[str]:
        """Why the task may not train (empty: it may)."""
        if (known := self._verdicts.get(task_id)) is None:
            known = self._verdicts[task_id] = self._judge(task_id)
        return list(known)

    def _judge(self, task_id: str) -> list[str]:
        task = self.catalog.get(task_id)
        if task is None:
            return [f"{task_id}: not in the catalog"]
        why = [] if task.split == Split.TRAIN else [f"{task_id}: a {task.split or 'split-less'}"
                                                    " task"]
        why += [f"{task_id}: shares {_short(m)} with a held-out task"
                for m in sorted(marks_of(task) & self.held_out_marks)]
        if (group := group_of(task)) in self.held_out_groups:
            why.append(f"{task_id}: its group {group} is out of distribution")
        return why

    def trainable(self, task_id: str) -> bool:
        return not self.reasons(task_id)

    def leaks(self, trained_task_ids: Iterable[str]) -> list[str]:
        """Every reason of every task in the set (empty: nothing held out reached training)."""
        return [r for task_id in sorted(set(trained_task_ids)) for r in self.reasons(task_id)]


def held_out_leaks(trained_task_ids: Iterable[str], catalog: Mapping[str, Task]) -> list[str]:
    """`LeakGuard.of(catalog).leaks(trained_task_ids)`: empty when nothing held out trained."""
    return LeakGuard.of(catalog).leaks(trained_task_ids)


def train_solutions(catalog: Iterable[Task]) -> frozenset[str]:
    """The solutions the train split's task files hold (whether or not the guard lets them
    train): what a copying policy could have learned."""
    return frozenset(s for t in catalog if t.split == Split.TRAIN
                     and (s := solution_of(t)) is not None)


def novel_solution(task: Task, solutions: frozenset[str]) -> bool:
    """A held-out task whose reference is known and is no train task's: copying a train
    solution cannot solve it. A task without a reference is not counted as novel."""
    solution = solution_of(task)
    return solution is not None and solution not in solutions
