"""A generated task before it has an id and a split, and how it becomes a JSONL record."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from environments.tasks.common import Action, task
from webgym_common.choices import Split
from webgym_common.tasks import ROLLOUT_POOL, max_steps_for

BENCHMARK = "webgym-sandbox-gen"  # suite_of: any "webgym-sandbox*" benchmark is the sandbox


@dataclass(frozen=True)
class Draft:
    """One template instance. `entities` are what its fact groups talk about (see splits).
    `pool_only`: a further instance drafted for the rollout pool (another spec, date, post...
    of an entity), kept only when its entities are all pool entities (splits.pooled)."""

    template: str
    instruction: str
    site: str
    subdomain: str
    difficulty: int
    facts: list[tuple[str, list[str]]]
    actions: list[Action]
    entities: list[str]
    pool_only: bool = False


def pool_only(drafts: Iterable[Draft]) -> list[Draft]:
    return [replace(x, pool_only=True) for x in drafts]


def to_record(draft: Draft, number: int, split: Split, pool: bool = False) -> dict[str, Any]:
    """The JSONL line: the hand-written tasks' shape plus split, the rollout pool's mark
    (`"pool": "rollout"`, only in the pool), template and entities.

    max_steps follows the split (WebGym gives test tasks the larger test budgets)."""
    record = task(f"gen-{draft.template}-{number:03d}", draft.instruction, site=draft.site,
                  subdomain=draft.subdomain, path=f"/{draft.site}/",
                  difficulty=draft.difficulty, facts=draft.facts, actions=draft.actions)
    record["benchmark_name"] = BENCHMARK
    record["max_steps"] = max_steps_for(draft.difficulty, split)
    record["split"] = str(split)
    if pool:
        record["pool"] = ROLLOUT_POOL
    record["template"] = draft.template
    record["entities"] = list(draft.entities)
    return record
