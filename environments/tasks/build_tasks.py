"""Regenerate ``sandbox_tasks.jsonl`` (the hand-written tasks) and ``generated_tasks.jsonl``
(the template-generated suites, see ``environments.tasks.generators``):
``python -m environments.tasks.build_tasks``.

Answers are computed from the same data modules the sandbox server renders, so the files
stay consistent with the sites as long as they are rebuilt after a data change.

Every hand-written task names its template and its entities, and takes its split by the rule
the generated tasks follow (generators/splits.py: `keep`, `split_of`). A task that rule drops
(its entities on two sides of the partition, or a comparison over an entity that is not held
out) is left out of the file and listed in MIXED with the reason; the build fails when the
rule and the table disagree, so a data change that moves an entity is noticed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from environments.tasks import forum_tasks, hostile_tasks, shop_tasks, travel_tasks, wiki_tasks
from environments.tasks.generators import splits
from environments.tasks.generators.build import generated_tasks
from webgym_common.tasks import max_steps_for

OUTPUT = Path(__file__).with_name("sandbox_tasks.jsonl")
GENERATED_OUTPUT = Path(__file__).with_name("generated_tasks.jsonl")

# Hand-written tasks left out of sandbox_tasks.jsonl. Whichever split one of them took, one of
# its entities would appear in two splits (or a policy would train on the held-out kind), so
# the promise that no test, validation or ood entity is ever seen in training would break.
_COMPARE = "a comparison (the held-out ood kind) over entities that are not all test ones: "
MIXED: dict[str, str] = {
    "shop-005": "counts all nine Everlight products: Everlight Tune 522 is test, the rest train",
    "shop-006": "picks the top-rated among all eight headphones: train, test (Dynamo Bass 712, "
                "Everlight Tune 522) and validation (Acme Wave 532) products",
    "shop-008": "picks the cheapest among all eight phones: train, test and validation products",
    "shop-009": "picks the cheaper Acme monitor: Acme Panorama 914 is test, Acme Lumen 964 train",
    "shop-013": _COMPARE + "three of the four headphones under $200 are train",
    "shop-015": "picks the better-rated Cobalt laptop: Cobalt Atlas 320 is test, Cobalt Pilot "
                "370 train",
    "shop-018": "carts Acme Volt 500 (train) and Everlight Tune 522 (test)",
    "shop-019": _COMPARE + "of the cameras under $850 one is train and one validation",
    "wiki-011": "follows Ambra River and Mount Corvel (Veloria: test) to Edda Lind (born in "
                "Halvmark: validation)",
    "wiki-017": _COMPARE + "Tessavar and Quenby are test; Pellucia, Arvento and Lucia Ortolan "
                "train",
    "forum-006": "picks the oldest of the seven Python help threads: one test, six train",
    "forum-009": "picks the top reputation among all eight members: erin is validation, heidi "
                 "test, the rest train",
}


def _with_split(record: dict[str, Any]) -> dict[str, Any]:
    """The JSONL line of a kept task: split, template and entities last, as in the generated
    file, and max_steps following the split (WebGym gives held-out tasks larger budgets)."""
    template, entities = record.pop("template"), record.pop("entities")
    split = splits.split_of(template, entities)
    record["max_steps"] = max_steps_for(record["difficulty"], split)
    return {**record, "split": str(split), "template": template, "entities": entities}


def written() -> list[dict[str, Any]]:
    """Every hand-written task, with its template and entities but no split yet."""
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


def all_tasks() -> list[dict[str, Any]]:
    """The hand-written tasks the split rule keeps, each with its split."""
    tasks = written()
    dropped = [t["task_id"] for t in tasks if not splits.keep(t["template"], t["entities"])]
    assert sorted(dropped) == sorted(MIXED), f"MIXED is stale: the rule drops {dropped}"
    return [_with_split(t) for t in tasks if t["task_id"] not in MIXED]


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
