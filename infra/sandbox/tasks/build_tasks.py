"""Regenerate ``sandbox_tasks.jsonl`` (the 69 hand-written tasks) and
``generated_tasks.jsonl`` (the template-generated suites with train/test/ood splits, see
``infra.sandbox.tasks.generators``): ``python -m infra.sandbox.tasks.build_tasks``.

Answers are computed from the same data modules the sandbox server renders, so the files
stay consistent with the sites as long as they are rebuilt after a data change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infra.sandbox.tasks import forum_tasks, hostile_tasks, shop_tasks, travel_tasks, wiki_tasks
from infra.sandbox.tasks.generators.build import generated_tasks

OUTPUT = Path(__file__).with_name("sandbox_tasks.jsonl")
GENERATED_OUTPUT = Path(__file__).with_name("generated_tasks.jsonl")


def all_tasks() -> list[dict[str, Any]]:
    tasks = [
        *shop_tasks.tasks(),
        *wiki_tasks.tasks(),
        *forum_tasks.tasks(),
        *travel_tasks.tasks(),
        *hostile_tasks.tasks(),
    ]
    ids = [t["task_id"] for t in tasks]
    assert len(ids) == len(set(ids)), "duplicate task ids"
    return tasks


def write(path: Path, tasks: list[dict[str, Any]]) -> int:
    with path.open("w", encoding="utf-8") as fh:
        for t in tasks:
            fh.write(json.dumps(t, ensure_ascii=False) + "\n")
    print(f"wrote {len(tasks)} tasks to {path}")
    return len(tasks)


def main(path: Path = OUTPUT, generated_path: Path = GENERATED_OUTPUT) -> int:
    """Both files; returns the hand-written count (what callers have always been told)."""
    write(generated_path, generated_tasks())
    return write(path, all_tasks())


if __name__ == "__main__":
    main()
