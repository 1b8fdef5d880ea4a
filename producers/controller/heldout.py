"""The fixed, stratified held-out set an evaluation runs: which tasks, per suite and split.

A draw of `limit` tasks over a whole split lets chance decide how often each MiniWoB++
environment or sandbox template is asked, so two draws (or two versions on different
draws) measure different mixes. The held-out set instead takes `per_group` tasks of every
group (webgym_common.tasks.group_of: the MiniWoB++ environment, the sandbox template), a
group with fewer giving all it has. Within a group the choice is seeded by the seed and the
group's name over the group's tasks in task-id order, so it is the same on every run and
machine, and independent of the catalog's order and of the other groups.

`HELDOUT_PER_GROUP` sizes it per suite so a rate is worth reading: from the task files in
environments/tasks, MiniWoB++ test is 6 seeds x 22 environments = 132 tasks, 71 of them
with a solution no train task has (the environments with one solution for every seed are
held out nowhere; ood 6 x 5 = 30), and sandbox test 8 per template over its templates
(117 tasks).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Mapping

from webgym_common.choices import Split, Suite
from webgym_common.events import Task
from webgym_common.tasks import group_of, in_split, in_suite

# Tasks per group of the fixed held-out set, per suite (see the module's docstring).
HELDOUT_PER_GROUP: Mapping[Suite, int] = {Suite.MINIWOB: 6, Suite.SANDBOX: 8, Suite.WEB: 8}



def per_group_for(per_group: int | Mapping[Suite, int], suite: Suite) -> int:
    """One count for every suite, or the suite's own (HELDOUT_PER_GROUP's fallback for a
    suite the mapping leaves out)."""
    if isinstance(per_group, int):
        return per_group
    return per_group.get(suite, HELDOUT_PER_GROUP[suite])


def stratified_tasks(catalog: Iterable[Task], suite: Suite, split: Split, per_group: int,
                     seed: int) -> list[Task]:
    """`per_group` tasks of each group among the suite's tasks marked for `split` (a group
    with fewer: all of them), seeded per group, by task id."""
    if per_group < 1:
        raise ValueError(f"per_group must be at least 1, got {per_group}")
    groups: dict[str, list[Task]] = defaultdict(list)
    for t in catalog:
        if in_suite(t, suite) and in_split(t, split):
            groups[group_of(t)].append(t)
    chosen: list[Task] = []
    for name, tasks in groups.items():
        pool = sorted(tasks, key=lambda t: t.task_id)
        if len(pool) > per_group:
            # a str seed hashes the same in every process (unlike hash()), so runs agree
            pool = random.Random(f"{seed}:{name}").sample(pool, per_group)
        chosen.extend(pool)
    return sorted(chosen, key=lambda t: t.task_id)
