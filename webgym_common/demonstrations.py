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
train-split tasks the leak guard lets train enter the bank (`bank_tasks`,
webgym_common.leaks: nothing that shares an id, a MiniWoB++ environment and seed, a template
and entity or a solution with a held-out task), and the replay processor and the trainer ask
the same guard again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from webgym_common.events import Task
from webgym_common.leaks import LeakGuard
from webgym_common.tasks import in_rollout_pool, suite_of

BANK_ITERATION = -2  # a bank episode belongs to no training iteration (evaluations: -1)
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
    """The train split's tasks with a reference sequence (of `suites`, if given) that the
    leak guard lets train, by id; never the rollout pool's (fresh tasks for the policy)."""
    tasks = list(catalog)
    wanted = set(suites) if suites is not None else None
    guard = LeakGuard.of(tasks)
    return sorted((t for t in tasks if t.split == "train" and t.reference_actions
                   and (wanted is None or suite_of(t) in wanted) and not in_rollout_pool(t)
                   and guard.trainable(t.task_id)),
                  key=lambda t: t.task_id)
