"""Static checks of the hand-written sandbox task file, and of the splits across it and the
generated file (the browser replay lives in tests/integration)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from environments import forum_data, shop_data, travel_data, wiki_data
from environments.app import GENERATED_TASKS_FILE, TASKS_FILE
from environments.tasks.build_tasks import MIXED, all_tasks, written
from environments.tasks.generators import splits
from webgym_common.choices import Split
from webgym_common.tasks import band_of, max_steps_for, parse_task_line

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
    "split": str,
    "template": str,
    "entities": list,
}
OPTIONAL = {"definite_answer": str, "reference_answer": str}
TARGETED = {"Click", "Hover", "Type", "Select"}
UNTARGETED = {"Scroll", "GoBack", "Wait"}


ROUTES = {f"{a} to {b}" for a in travel_data.CITIES.values() for b in travel_data.CITIES.values()
          if a != b}
# Where each kind of entity is defined: the data modules the sandbox server renders.
KNOWN: dict[str, set[str]] = {
    "product": {p.name for p in shop_data.PRODUCTS},
    "article": set(wiki_data.BY_TITLE),
    "thread": set(forum_data.BY_TITLE),
    "member": set(forum_data.USER_BY_NAME),
    "route": ROUTES,
}
HELD_OUT = {"validation", "test", "ood"}


def _lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def _load() -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in _lines(TASKS_FILE)]


TASKS = _load()
GENERATED = [json.loads(ln) for ln in _lines(GENERATED_TASKS_FILE)]
BOTH = TASKS + GENERATED


def test_enough_unique_tasks() -> None:
    assert len(TASKS) >= 50
    ids = Counter(t["task_id"] for t in TASKS)
    assert [i for i, n in ids.items() if n > 1] == []


def test_every_written_task_is_in_the_file_or_left_out_with_a_reason() -> None:
    ids = [t["task_id"] for t in written()]
    assert len(ids) == 69
    assert sorted([t["task_id"] for t in TASKS] + list(MIXED)) == sorted(ids)
    assert all(reason.strip() for reason in MIXED.values())
    for t in written():  # the table says what the rule says: each one mixes sides
        assert splits.keep(t["template"], t["entities"]) == (t["task_id"] not in MIXED)


@pytest.mark.parametrize("path", [TASKS_FILE, GENERATED_TASKS_FILE], ids=lambda p: p.name)
def test_every_line_of_both_files_has_a_split(path: Path) -> None:
    lines = _lines(path)
    assert lines
    for line in lines:
        raw = json.loads(line)
        assert raw.get("split") in {s.value for s in Split}, raw["task_id"]
        assert parse_task_line(line).split == raw["split"]


def test_hand_written_tasks_take_their_split_by_the_generators_rule() -> None:
    templates = Counter(t["template"] for t in TASKS)
    for t in TASKS:
        assert t["template"].startswith("hand-"), t["template"]
        assert splits.keep(t["template"], t["entities"]), t["task_id"]
        assert t["split"] == splits.split_of(t["template"], t["entities"]), t["task_id"]
        assert t["max_steps"] == max_steps_for(t["difficulty"], t["split"]), t["task_id"]
    assert {t["split"] for t in TASKS} == {s.value for s in Split}
    # Hostile pages are about nothing: no entities, so train.
    hostile = [t for t in TASKS if t["domain"] == "sandbox-hostile"]
    assert hostile and all(t["entities"] == [] and t["split"] == "train" for t in hostile)
    # The hand-written comparisons are the held-out kind: ood, or left out.
    written_templates = {t["template"] for t in written()}
    assert splits.HAND_OOD_TEMPLATES <= written_templates
    for t in TASKS:
        assert (t["split"] == "ood") == (t["template"] in splits.HAND_OOD_TEMPLATES)
    assert len(templates) >= 15  # one per kind of question, not one per task
    assert {t["template"] for t in TASKS}.isdisjoint({t["template"] for t in GENERATED})


def test_entities_exist_in_the_sandbox_data() -> None:
    for t in BOTH:
        assert len(t["entities"]) == len(set(t["entities"])), t["task_id"]
        for e in t["entities"]:
            kind, _, name = e.partition(":")
            assert name in KNOWN.get(kind, set()), (t["task_id"], e)
    for t in TASKS:
        if t["domain"] != "sandbox-hostile":
            assert t["entities"], t["task_id"]


def test_no_entity_in_two_splits_across_both_files() -> None:
    """train, validation and test share no entity; ood shares only with test."""
    splits_of: dict[str, set[str]] = {}
    for t in BOTH:
        for e in t["entities"]:
            splits_of.setdefault(e, set()).add(t["split"])
    assert any(len(s - {"ood"}) for s in splits_of.values())
    for e, seen in splits_of.items():
        assert len(seen - {"ood"}) <= 1, (e, seen)
        if "ood" in seen:
            assert seen <= {"ood", "test"}, (e, seen)
    # Every hand-written entity is on the side its task's split says.
    for t in TASKS:
        if t["split"] != "ood":
            assert {str(splits.side_of(e)) for e in t["entities"]} <= {t["split"]}


def _solution(task: dict[str, Any]) -> str:
    return json.dumps([task["reference_actions"], task.get("definite_answer")], sort_keys=True)


def test_no_train_task_repeats_a_held_out_solution() -> None:
    """A train task with the very steps and answer of a held-out one (hand-written wiki-001
    was word for word gen-wiki-infobox-001) would teach the held-out answer under another id."""
    held_out: dict[str, str] = {}
    for t in BOTH:
        if t["split"] in HELD_OUT:
            held_out.setdefault(_solution(t), t["task_id"])
    repeats = [(t["task_id"], held_out[_solution(t)]) for t in BOTH
               if t["split"] == "train" and _solution(t) in held_out]
    assert repeats == []
    # The check sees across the files: that pair is now on one side, both test.
    wiki, gen = (next(t for t in BOTH if t["task_id"] == i)
                 for i in ("wiki-001", "gen-wiki-infobox-001"))
    assert _solution(wiki) == _solution(gen) and wiki["split"] == gen["split"] == "test"


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
