"""Static checks of the sandbox task file (the browser replay lives in tests/integration)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from infra.sandbox.app import TASKS_FILE
from infra.sandbox.tasks.build_tasks import all_tasks
from webgym_common.tasks import band_of

SITES = {"sandbox-shop", "sandbox-wiki", "sandbox-forum", "sandbox-travel"}
REQUIRED: dict[str, type | tuple[type, ...]] = {
    "task_id": str,
    "task_name": str,
    "domain": str,
    "subdomain": str,
    "website": str,
    "difficulty": int,
    "evaluator_reference": list,
    "attempt_level": int,
    "max_steps": int,
    "benchmark_name": str,
    "reference_actions": list,
}
OPTIONAL = {"definite_answer": str, "reference_answer": str}
TARGETED = {"Click", "Hover", "Type", "Select"}
UNTARGETED = {"Scroll", "GoBack", "Wait"}


def _load() -> list[dict[str, Any]]:
    lines = [ln for ln in TASKS_FILE.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return [json.loads(ln) for ln in lines]


TASKS = _load()


def test_enough_unique_tasks() -> None:
    assert len(TASKS) >= 60
    ids = Counter(t["task_id"] for t in TASKS)
    assert [i for i, n in ids.items() if n > 1] == []


def test_file_matches_generator() -> None:
    """The JSONL is generated; a data change without a rebuild would break answers."""
    assert TASKS == json.loads(json.dumps(all_tasks(), ensure_ascii=False))


def test_sites_and_difficulty_bands_covered() -> None:
    assert SITES <= {t["domain"] for t in TASKS}
    for site in SITES:
        bands = {band_of(t["difficulty"]) for t in TASKS if t["domain"] == site}
        assert bands == {"easy", "medium", "hard"}, site


@pytest.mark.parametrize("task", TASKS, ids=[t["task_id"] for t in TASKS])
def test_task_fields(task: dict[str, Any]) -> None:
    for key, typ in REQUIRED.items():
        assert key in task, key
        assert isinstance(task[key], typ) and not isinstance(task[key], bool), key
    for key, typ in OPTIONAL.items():
        if key in task:
            assert isinstance(task[key], typ) and task[key], key
    assert task["website"].startswith("{sandbox}/")
    assert task["benchmark_name"] == "webgym-sandbox"
    assert task["attempt_level"] == 0
    assert task["difficulty"] >= 1
    assert task["task_name"].strip()
    assert task["evaluator_reference"], "needs at least one fact group"
    for i, group in enumerate(task["evaluator_reference"], start=1):
        assert group["id"] == i
        assert isinstance(group["description"], str) and group["description"]
        assert group["facts"] and all(isinstance(f, str) and f for f in group["facts"])


@pytest.mark.parametrize("task", TASKS, ids=[t["task_id"] for t in TASKS])
def test_reference_actions(task: dict[str, Any]) -> None:
    steps = task["reference_actions"]
    assert 3 <= len(steps) <= 15, f"{len(steps)} steps"
    assert len(steps) <= task["max_steps"]
    assert steps[-1]["action"] == "ANSWER"
    assert isinstance(steps[-1]["text"], str) and steps[-1]["text"].strip()
    assert all(s["action"] != "ANSWER" for s in steps[:-1]), "ANSWER must be last only"
    for s in steps[:-1]:
        kind = s["action"]
        assert kind in TARGETED | UNTARGETED, kind
        if kind in TARGETED:
            assert isinstance(s["role"], str) and s["role"]
            assert isinstance(s["name"], str) and s["name"]
            if "nth" in s:
                assert isinstance(s["nth"], int) and s["nth"] >= 0
        if kind == "Type":
            assert isinstance(s["text"], str) and s["text"]
        if kind == "Select":
            assert s["role"] == "combobox" and isinstance(s["option"], str)
        if kind == "Scroll":
            assert s["direction"] in ("up", "down")
    if "definite_answer" in task:
        assert steps[-1]["text"] == task["definite_answer"]


def test_longer_references_for_harder_tasks() -> None:
    mean: dict[str, float] = {}
    for band in ("easy", "medium", "hard"):
        lengths = [len(t["reference_actions"]) for t in TASKS if band_of(t["difficulty"]) == band]
        mean[band] = sum(lengths) / len(lengths)
    assert mean["easy"] < mean["medium"] < mean["hard"], mean
