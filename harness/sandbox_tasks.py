"""Sandbox task lines that tests pick from the real task file."""

from __future__ import annotations

import json
from typing import Any

from webgym_common.config.pipeline import SANDBOX_TASKS


def short_train_tasks() -> list[dict[str, Any]]:
    """The short train tasks of shop, wiki and forum (at most 4 reference actions and a
    definite answer): an iteration on the train split draws only those."""
    lines = [json.loads(x) for x in SANDBOX_TASKS.read_text().splitlines()]
    return [x for x in lines if x["task_id"].split("-")[0] in ("shop", "wiki", "forum")
            and x["split"] == "train" and x.get("definite_answer")
            and len(x["reference_actions"]) <= 4]
