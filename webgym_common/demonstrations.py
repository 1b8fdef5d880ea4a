"""The demonstration bank: every verified reference of the train split, run once as data.

Delivery: the bank is a set of teacher-forced episodes (EpisodeRequested.demonstration) that
belong to no iteration (`BANK_ITERATION`). They go through the real pipeline like any episode
(browser, policy processor, evaluator), so each step's prompt is exactly the prompt the policy
sends, and the replay processor turns their successful steps into ReplaySamples on
webgym.replay, where the trainer reads them. Episode ids are deterministic
(`bank_episode_id`: prompt version, index, task), so building the bank again resumes it and
never requests an episode twice; a new prompt version makes a new bank beside the old one.

Provenance travels in the ids: a bank sample's id is `<episode id>:<step>`, the episode id
names the prompt version and the task; the task's suite and split are in the catalog. Only
train-split tasks enter the bank (`bank_tasks`), the replay processor keeps train-split
episodes only, and `held_out_leaks` checks a set of trained task ids against the catalog's
held-out tasks by id, by MiniWoB++ environment and seed, and by sandbox template and entity.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from webgym_common.events import Task
from webgym_common.tasks import entities_of, group_of, suite_of

BANK_ITERATION = -2  # a bank episode belongs to no training iteration (evaluations: -1)
HELD_OUT_SPLITS = ("test", "ood")
_BANK_ID = re.compile(r"^train-bank(?P<prompt>[A-Za-z0-9]+)-(?P<index>\d{4,})-(?P<task>.+)$")


def bank_episode_id(prompt_version: str, index: int, task_id: str) -> str:
    # split first, like every episode id: one "-"-free word, then the bank, index and task
    return f"train-bank{prompt_version}-{index:04d}-{task_id}"


def parse_bank_episode_id(episode_id: str) -> tuple[str, str] | None:
    """(prompt version, task id) of a bank episode id, or None for any other id."""
    m = _BANK_ID.match(episode_id)
    return (m["prompt"], m["task"]) if m else None


def is_bank_sample(iteration: int) -> bool:
    return iteration == BANK_ITERATION


def bank_tasks(catalog: Iterable[Task], suites: Iterable[str] | None = None) -> list[Task]:
    """The train split's tasks with a reference sequence (of `suites`, if given), by id."""
    wanted = set(suites) if suites is not None else None
    return sorted((t for t in catalog if t.split == "train" and t.reference_actions
                   and (wanted is None or suite_of(t) in wanted)),
                  key=lambda t: t.task_id)


def _fingerprints(task: Task) -> set[str]:
    """What a held-out task must not share with a trained one."""
    marks = {f"id:{task.task_id}"}
    env = task.environment
    if env is not None:
        marks.add(f"env:{env.name}:seed:{env.seed}")
    marks.update(f"entity:{group_of(task)}:{e}" for e in entities_of(task))
    return marks


def held_out_leaks(trained_task_ids: Iterable[str], catalog: Mapping[str, Task],
                   ) -> list[str]:
    """Why each trained task that touches a held-out one does ("<task>: <shared mark>"):
    a test/ood task itself, an unknown task, the same MiniWoB++ environment seed as a
    held-out task, an out-of-distribution environment or template, or a held-out entity of
    the same template. Empty: nothing held out reached training."""
    held_out = [t for t in catalog.values() if t.split in HELD_OUT_SPLITS]
    marks = set().union(*(_fingerprints(t) for t in held_out)) if held_out else set()
    ood_groups = {group_of(t) for t in held_out if t.split == "ood"}
    leaks: list[str] = []
    for task_id in sorted(set(trained_task_ids)):
        task = catalog.get(task_id)
        if task is None:
            leaks.append(f"{task_id}: not in the catalog")
            continue
        if task.split != "train":
            leaks.append(f"{task_id}: a {task.split or 'split-less'} task")
        shared = sorted(_fingerprints(task) & marks)
        leaks.extend(f"{task_id}: shares {m} with a held-out task" for m in shared)
        if (group := group_of(task)) in ood_groups:
            leaks.append(f"{task_id}: its group {group} is out of distribution")
    return leaks
