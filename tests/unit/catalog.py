"""The project's real task files as one catalog, for the tests that check properties of them."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from webgym_common.events import Task
from webgym_common.tasks import read_task_file

TASK_FILES = tuple(Path("environments/tasks") / name for name in (
    "miniwob_tasks.jsonl", "generated_tasks.jsonl", "sandbox_tasks.jsonl"))


@cache
def real_catalog() -> dict[str, Task]:
    """task id -> Task over every task file; a file with a bad line fails the caller."""
    tasks: dict[str, Task] = {}
    for path in TASK_FILES:
        read, bad = read_task_file(path)
        assert not bad, f"{path}: {bad[:3]}"
        tasks.update({t.task_id: t for t in read})
    return tasks
