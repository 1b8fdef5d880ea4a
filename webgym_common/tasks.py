"""WebGym's JSONL task format: one task per line, validated into Task events.

A bad line is reported with its number and reason and skipped; the rest load.
Fields the schema does not know are kept in `extra_json` so nothing is lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from webgym_common.config import Band
from webgym_common.events import Task

_TASK_FIELDS = set(Task.model_fields) - {"event_id", "produced_at", "schema_version"}


class TaskLineError(ValueError):
    pass


@dataclass(frozen=True)
class BadLine:
    line_number: int
    reason: str


def parse_task_line(line: str) -> Task:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as err:
        raise TaskLineError(f"not JSON: {err.msg} at column {err.colno}") from None
    if not isinstance(raw, dict):
        raise TaskLineError(f"expected a JSON object, got {type(raw).__name__}")
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
    return task


def read_task_file(path: Path) -> tuple[list[Task], list[BadLine]]:
    tasks, bad = [], []
    with path.open(encoding="utf-8", errors="replace") as src:
        for number, line in enumerate(src, 1):
            if not line.strip():
                continue
            try:
                tasks.append(parse_task_line(line))
            except TaskLineError as err:
                bad.append(BadLine(number, str(err)))
    return tasks, bad


def band_of(difficulty: int) -> Band:
    return Band.EASY if difficulty <= 3 else Band.MEDIUM if difficulty <= 6 else Band.HARD


# WebGym's step limits per band: 10/20/30 in training, 30/50/70 in test.
_STEP_LIMITS = {
    "train": {Band.EASY: 10, Band.MEDIUM: 20, Band.HARD: 30},
    "test": {Band.EASY: 30, Band.MEDIUM: 50, Band.HARD: 70},
}


def max_steps_for(difficulty: int, split: str) -> int:
    return _STEP_LIMITS["train" if split == "train" else "test"][band_of(difficulty)]
