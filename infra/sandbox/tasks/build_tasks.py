"""Regenerate ``sandbox_tasks.jsonl``: ``python -m infra.sandbox.tasks.build_tasks``.

Answers are computed from the same data modules the sandbox server renders, so the file
stays consistent with the sites as long as it is rebuilt after a data change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infra.sandbox.tasks import forum_tasks, hostile_tasks, shop_tasks, travel_tasks, wiki_tasks

OUTPUT = Path(__file__).with_name("sandbox_tasks.jsonl")


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


def main(path: Path = OUTPUT) -> int:
    tasks = all_tasks()
    with path.open("w", encoding="utf-8") as fh:
        for t in tasks:
            fh.write(json.dumps(t, ensure_ascii=False) + "\n")
    print(f"wrote {len(tasks)} tasks to {path}")
    return len(tasks)


if __name__ == "__main__":
    main()
