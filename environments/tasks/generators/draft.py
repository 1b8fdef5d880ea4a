"""A generated task before it has an id and a split, and how it becomes a JSONL record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from environments.tasks.common import Action, task
from webgym_common.choices import Split
from webgym_common.tasks import max_steps_for

BENCHMARK = "webgym-sandbox-gen"  # suite_of: any "webgym-sandbox*" benchmark is the sandbox


@dataclass(frozen=True)
class Draft:
    """One template instance. `entities` are what its fact groups talk about (see splits)."""

    template: str
    instruction: str
    site: str
    subdomain: str
    difficulty: int
    facts: list[tuple[str, list[str]]]
    actions: list[Action]
    entities: list[str]


def to_record(draft: Draft, number: int, split: Split) -> dict[str, Any]:
    """The JSONL line: the hand-written tasks' shape plus split, template and entities.

    max_steps follows the split (WebGym gives test tasks the larger test budgets)."""
    record = task(f"gen-{draft.template}-{number:03d}", draft.instruction, site=draft.site,
                  subdomain=draft.subdomain, path=f"/{draft.site}/",
                  difficulty=draft.difficulty, facts=draft.facts, actions=draft.actions)
    record["benchmark_name"] = BENCHMARK
    record["max_steps"] = max_steps_for(draft.difficulty, split)
    record["split"] = str(split)
    record["template"] = draft.template
    record["entities"] = list(draft.entities)
    return record
