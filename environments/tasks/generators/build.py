"""Generated tasks as JSONL records, in a fixed order, and a summary table for the README."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from environments.tasks.generators import forum_gen, shop_gen, splits, travel_gen, wiki_gen
from environments.tasks.generators.draft import Draft, to_record
from webgym_common.choices import Split
from webgym_common.tasks import ROLLOUT_POOL, band_of

TEMPLATES: list[Callable[[], list[Draft]]] = [
    *shop_gen.TEMPLATES, *wiki_gen.TEMPLATES, *forum_gen.TEMPLATES, *travel_gen.TEMPLATES,
]


def generated_tasks() -> list[dict[str, Any]]:
    """Every template's kept drafts, numbered per template from 001 among the drafts that keep
    test entities apart (`splits.numbered`, the numbering from before the validation split):
    a test or ood task keeps its id, and so does a train task; a draft dropped for mixing
    validation with train entities, or pool with bank entities, leaves a gap. The pool-only
    drafts a template kept (`Draft.pool_only`) are numbered after all of them."""
    records: list[dict[str, Any]] = []
    for template in TEMPLATES:
        drafts = template()
        numbered = [x for x in drafts
                    if not x.pool_only and splits.numbered(x.template, x.entities)]
        for n, draft in enumerate(numbered, start=1):
            if splits.keep(draft.template, draft.entities):
                split = splits.split_of(draft.template, draft.entities)
                if split != Split.TRAIN:
                    records.append(to_record(draft, n, split))
                elif splits.pool_apart(draft.entities):
                    records.append(to_record(draft, n, split, splits.pooled(draft.entities)))
        fresh = [x for x in drafts if x.pool_only and splits.keep(x.template, x.entities)
                 and splits.split_of(x.template, x.entities) == Split.TRAIN
                 and splits.pooled(x.entities)]
        records += [to_record(x, n, Split.TRAIN, pool=True)
                    for n, x in enumerate(fresh, start=len(numbered) + 1)]
    ids = [r["task_id"] for r in records]
    assert len(ids) == len(set(ids)), "duplicate task ids"
    names = [r["task_name"] for r in records]
    assert len(names) == len(set(names)), "duplicate instructions (the loader drops repeats)"
    return records


def summary_table(records: list[dict[str, Any]]) -> str:
    """Markdown: one row per template with its site, band, difficulty and tasks per split
    (the train tasks' rollout-pool ones apart: train = bank + pool)."""
    rows = ["| Template | Site | Band (difficulty) | train: bank | train: pool | validation "
            "| test | ood |",
            "|---|---|---|---|---|---|---|---|"]
    per: dict[str, Counter[str]] = {}
    first: dict[str, dict[str, Any]] = {}
    for r in records:
        per.setdefault(r["template"], Counter())[_column(r)] += 1
        first.setdefault(r["template"], r)
    for name, counts in per.items():
        r = first[name]
        rows.append(f"| `{name}` | {r['domain'].removeprefix('sandbox-')} | "
                    f"{band_of(r['difficulty'])} ({r['difficulty']}) | {counts['train']} | "
                    f"{counts['pool']} | {counts['validation']} | {counts['test']} | "
                    f"{counts['ood']} |")
    total = Counter(map(_column, records))
    rows.append(f"| **all {len(per)} templates** | | | {total['train']} | {total['pool']} | "
                f"{total['validation']} | {total['test']} | {total['ood']} |")
    return "\n".join(rows)


def _column(record: dict[str, Any]) -> str:
    return "pool" if record.get("pool") == ROLLOUT_POOL else str(record["split"])
