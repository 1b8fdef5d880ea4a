"""WebGym's JSONL task format: one task per line, validated into Task events.

A bad line is reported with its number and reason and skipped; the rest load.
Fields the schema does not know are kept in `extra_json` so nothing is lost.

Every task has a split (train, validation, test or ood). WebGym keeps train and test in
separate files, so a file's split can be given for its lines that name none
(`read_task_file(..., split=...)`, `webgym tasks load FILE --split SPLIT`); a line with no
split of its own and none given is a bad line, and so is one whose split contradicts the
file's: a task nobody placed must never be counted as train.

WebGym's own task files load unchanged (`normalise`): `task_id` an integer or absent
(then a stable id from the task's content, so a resumed run finds the same task again),
`website` without a scheme (https:// is added), `evaluator_reference` as a string, a
list of strings, a list of `{description, difficulty}` objects or fact groups
`{id, description, facts}` (each becomes fact groups: one criterion per string or
description), `definite_answer` null, optional `attempt_level` and `_trajectory_index`
(kept in extra_json). A file's repeated tasks, the same (subdomain, website, difficulty,
task_name) as WebGym deduplicates them, are reported and skipped.

A file is read as a stream (`task_file_lines` -> `parse_task_lines`): one line at a time,
each parsed when the consumer takes it; what is remembered across lines is 8 bytes per
distinct task (to name a repeat's first line), never the tasks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from webgym_common.choices import Band, Split, Suite
from webgym_common.events import Task

_TASK_FIELDS = set(Task.model_fields) - {"event_id", "produced_at", "schema_version"}
# What makes two lines the same task (WebGym drops such repeats); also a derived id's input.
DEDUP_FIELDS = ("subdomain", "website", "difficulty", "task_name")


class TaskLineError(ValueError):
    pass


@dataclass(frozen=True)
class BadLine:
    line_number: int
    reason: str


def derived_task_id(raw: dict[str, Any]) -> str:
    """A stable id for a task without one: the digest of what makes it the same task."""
    key = json.dumps([raw.get(k) for k in DEDUP_FIELDS], sort_keys=True, default=str)
    return "t-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def fact_groups(reference: Any) -> list[dict[str, Any]]:
    """Any of WebGym's evaluator_reference shapes as fact groups {id, description, facts}."""
    if reference is None:
        return []
    if isinstance(reference, str):
        return [{"id": 1, "description": "", "facts": [reference]}] if reference.strip() else []
    if not isinstance(reference, list):
        raise TaskLineError("evaluator_reference: expected a string, a list of strings, of "
                            f"{{description, difficulty}} or of fact groups, got "
                            f"{type(reference).__name__}")
    groups = []
    for n, item in enumerate(reference, 1):
        if isinstance(item, str):
            groups.append({"id": n, "description": "", "facts": [item]})
        elif isinstance(item, dict) and "facts" in item:
            groups.append(item)  # a fact group as it is (validated with the Task)
        elif isinstance(item, dict) and isinstance(item.get("description"), str):
            groups.append({"id": n, "description": item["description"],
                           "facts": [item["description"]]})
        else:
            raise TaskLineError(f"evaluator_reference[{n - 1}]: expected a string, "
                                f"{{description, difficulty}} or {{id, description, facts}}")
    return groups


def normalise(raw: dict[str, Any]) -> dict[str, Any]:
    """WebGym's accepted variants of a task line as this project's Task fields."""
    out = dict(raw)
    website = out.get("website")
    if isinstance(website, str) and website and "://" not in website and (
            not website.startswith("{")):  # "{sandbox}/shop/" is ours
        out["website"] = "https://" + website
    task_id = out.get("task_id")
    if task_id is None:  # absent or null (a blank string is an error, not an absence)
        out["task_id"] = derived_task_id(out)  # as deduplicated: with or without a scheme
    elif isinstance(task_id, int) and not isinstance(task_id, bool):
        out["task_id"] = str(task_id)
    if "evaluator_reference" in out:
        out["evaluator_reference"] = fact_groups(out["evaluator_reference"])
    return out


def parse_task_line(line: str, split: Split | None = None) -> Task:
    """One task line; `split` is the file's, for a line that names none."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as err:
        raise TaskLineError(f"not JSON: {err.msg} at column {err.colno}") from None
    if not isinstance(raw, dict):
        raise TaskLineError(f"expected a JSON object, got {type(raw).__name__}")
    raw = normalise(raw)
    known = {k: v for k, v in raw.items() if k in _TASK_FIELDS}
    extra = {k: v for k, v in raw.items() if k not in _TASK_FIELDS}
    if extra:
        known["extra_json"] = json.dumps(extra, sort_keys=True)
    try:
        task = Task.model_validate(known)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(line)"
        raise TaskLineError(f"field {where}: {first['msg']}") from None
    if not task.task_id.strip() or not task.task_name.strip():
        raise TaskLineError("task_id and task_name must not be empty")
    return with_split(task, split)


def with_split(task: Task, split: Split | None) -> Task:
    """The task with its split: its own, else the file's; an error when it has neither, or
    when the two disagree."""
    if task.split is None and split is None:
        raise TaskLineError("no split: give the line a \"split\" (" + ", ".join(Split)
                            + ") or the file one (webgym tasks load FILE --split SPLIT)")
    if task.split is None:
        return task.model_copy(update={"split": str(split)})
    if split is not None and task.split != split:
        raise TaskLineError(f"split {task.split!r} in a file loaded as {str(split)!r}")
    return task


def dedup_key(task: Task) -> tuple[Any, ...]:
    return (task.subdomain, task.website, task.difficulty, task.task_name)


def read_task_file(path: Path, on_lines: Callable[[int, int], None] | None = None,
                   split: Split | None = None) -> tuple[list[Task], list[BadLine]]:
    """The file's tasks and its bad lines (repeated tasks are bad lines saying so); `split`
    is the file's, for lines that name none. `on_lines(lines, bytes)` is told how far the
    read got, every 1000 lines and at the end. (Holds every task: `webgym tasks load`
    streams the same parse instead.)"""
    tasks: list[Task] = []
    bad: list[BadLine] = []
    for item in parse_task_lines(task_file_lines(path, on_lines), split):
        if isinstance(item, BadLine):
            bad.append(item)
        else:
            tasks.append(item)
    return tasks, bad


def parse_task_lines(lines: Iterable[tuple[int, str]], split: Split | None = None
                     ) -> Iterator[Task | BadLine]:
    """Each numbered line as its Task, or the BadLine saying why not (blank lines are
    neither), lazily: a line is taken from `lines` only when the one before it was taken
    from here. A repeat of an earlier line's task (dedup_key) is a BadLine naming it."""
    first_line: dict[int, int] = {}  # dedup_key's 8-byte digest -> its first line
    for number, line in lines:
        if not line.strip():
            continue
        try:
            task = parse_task_line(line, split)
        except TaskLineError as err:
            yield BadLine(number, str(err))
            continue
        if (seen := first_line.setdefault(key_digest(dedup_key(task)), number)) != number:
            yield BadLine(number, f"a repeat of line {seen} (the same subdomain, website, "
                                  "difficulty and task_name)")
            continue
        yield task


def key_digest(key: tuple[Any, ...] | str) -> int:
    """8 bytes that stand for a key in the sets a stream remembers (collisions: 1 in 2^64)."""
    text = key if isinstance(key, str) else json.dumps(key, default=str)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def task_file_lines(path: Path, on_lines: Callable[[int, int], None] | None = None
                    ) -> Iterator[tuple[int, str]]:
    """(line number, text), read as they are taken; `on_lines(lines, bytes read)` every 1000
    lines and at the end."""
    number, done = 0, 0
    with path.open("rb") as src:
        for number, raw in enumerate(src, 1):
            done += len(raw)
            if on_lines is not None and number % 1000 == 0:
                on_lines(number, done)
            yield number, raw.decode("utf-8", errors="replace")
    if on_lines is not None:
        on_lines(number, done)


def band_of(difficulty: int) -> Band:
    return Band.EASY if difficulty <= 3 else Band.MEDIUM if difficulty <= 6 else Band.HARD


# WebGym's step limits per band: 10/20/30 in training, 30/50/70 in test.
_STEP_LIMITS = {
    "train": {Band.EASY: 10, Band.MEDIUM: 20, Band.HARD: 30},
    "test": {Band.EASY: 30, Band.MEDIUM: 50, Band.HARD: 70},
}


def max_steps_for(difficulty: int, split: str) -> int:
    return _STEP_LIMITS["train" if split == "train" else "test"][band_of(difficulty)]


def step_limit(task: Task, split: str, cap: int | None = None) -> int:
    """An episode's step limit: the task's own, else WebGym's for its band and split; at most
    `cap` when one is given."""
    steps = task.max_steps or max_steps_for(task.difficulty, split)
    return min(steps, cap) if cap else steps


def suite_of(task: Task) -> Suite:
    """MiniWoB++ pages, the sandbox sites (benchmark webgym-sandbox*), or any other web task."""
    if task.environment is not None and task.environment.kind == Suite.MINIWOB:
        return Suite.MINIWOB
    if (task.benchmark_name or "").startswith("webgym-sandbox"):
        return Suite.SANDBOX
    return Suite.WEB


def in_suite(task: Task, suite: Suite) -> bool:
    return suite == Suite.ALL or suite_of(task) == suite


def in_split(task: Task, split: str) -> bool:
    """Whether a task may run in `split`: only when it is marked for it. A task without a
    split (only a log written before task files had to give one) runs in none: it is never
    counted as train, nor held out."""
    return task.split == split


def extra_of(task: Task) -> dict[str, Any]:
    """The task line's fields the schema does not know (template, entities, ...)."""
    try:
        extra = json.loads(task.extra_json or "{}")
    except ValueError:
        return {}
    return extra if isinstance(extra, dict) else {}


def group_of(task: Task) -> str:
    """What a task is an instance of: its MiniWoB++ environment, else its generator template,
    else its subdomain (held-out sets are stratified by it, ood holds whole groups out)."""
    if task.environment is not None:
        return task.environment.name
    return str(extra_of(task).get("template") or task.subdomain or task.domain)


# A task line's "pool": "rollout" marks a fresh train task (MiniWoB++'s rollout seeds): the
# policy's own to explore, never in the demonstration bank nor teacher-forced.
ROLLOUT_POOL = "rollout"


def in_rollout_pool(task: Task) -> bool:
    return extra_of(task).get("pool") == ROLLOUT_POOL


def entities_of(task: Task) -> list[str]:
    """The entities a generated task is about ("product:Acme Volt 500"): test tasks hold
    theirs out of training."""
    entities = extra_of(task).get("entities")
    return [str(e) for e in entities] if isinstance(entities, list) else []
