"""Static checks of generated_tasks.jsonl: fresh, loadable, and its splits disjoint.

The browser replay of every generated task lives in tests/integration/test_sandbox_reference.py.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from environments.app import GENERATED_TASKS_FILE
from environments.tasks.generators import splits
from environments.tasks.generators.build import generated_tasks, summary_table
from webgym_common.choices import Split, Suite
from webgym_common.tasks import (
    ROLLOUT_POOL,
    band_of,
    max_steps_for,
    parse_task_line,
    read_task_file,
    suite_of,
)

LINES = [ln for ln in GENERATED_TASKS_FILE.read_text(encoding="utf-8").splitlines() if ln.strip()]
TASKS: list[dict[str, Any]] = [json.loads(ln) for ln in LINES]
SITES = {"sandbox-shop", "sandbox-wiki", "sandbox-forum", "sandbox-travel"}
BANDS = {"easy", "medium", "hard"}
ENTITY_KINDS = {"product", "article", "thread", "route", "member"}
README = GENERATED_TASKS_FILE.parents[1] / "README.md"  # environments/README.md


def _of(split: str) -> list[dict[str, Any]]:
    return [t for t in TASKS if t["split"] == split]


def test_file_matches_generators() -> None:
    """The JSONL is generated; a data or template change without a rebuild fails here."""
    assert TASKS == json.loads(json.dumps(generated_tasks(), ensure_ascii=False))


def test_every_line_loads_as_a_sandbox_task_with_its_split() -> None:
    for line, raw in zip(LINES, TASKS, strict=True):
        task = parse_task_line(line)
        assert task.split == raw["split"]
        assert suite_of(task) == Suite.SANDBOX
        extra = json.loads(task.extra_json or "{}")
        assert extra["template"] == raw["template"] and extra["entities"] == raw["entities"]
    loaded, bad = read_task_file(GENERATED_TASKS_FILE)
    assert bad == [] and len(loaded) == len(TASKS)  # no line is dropped as a repeat


def test_unique_ids_named_after_their_template() -> None:
    ids = Counter(t["task_id"] for t in TASKS)
    assert [i for i, n in ids.items() if n > 1] == []
    for t in TASKS:
        assert re.fullmatch(rf"gen-{re.escape(t['template'])}-\d{{3}}", t["task_id"])


def test_fields() -> None:
    for t in TASKS:
        assert t["benchmark_name"] == "webgym-sandbox-gen"
        assert t["split"] in {s.value for s in Split}
        assert t["website"] == "{sandbox}/" + t["domain"].removeprefix("sandbox-") + "/"
        assert t["max_steps"] == max_steps_for(t["difficulty"], t["split"])
        assert t["evaluator_reference"] and all(g["facts"] for g in t["evaluator_reference"])
        assert t["entities"], t["task_id"]
        for e in t["entities"]:
            kind, _, name = e.partition(":")
            assert kind in ENTITY_KINDS and name, e
        steps = t["reference_actions"]
        assert 2 <= len(steps) <= t["max_steps"]
        assert [s["action"] for s in steps].count("ANSWER") == 1
        assert steps[-1] == {"action": "ANSWER", "text": t["definite_answer"]}
        for s in steps[:-1]:
            assert s["action"] in {"Click", "Type", "GoBack"}, s
            if s["action"] != "GoBack":
                assert s["role"] and s["name"], s


def test_no_held_out_entity_in_a_train_task() -> None:
    train = {e for t in _of("train") for e in t["entities"]}
    held_out = {e for t in TASKS if t["split"] != "train" for e in t["entities"]}
    assert train and held_out
    assert train & held_out == set()
    assert not any(splits.is_test_entity(e) for e in train)


def test_each_split_holds_the_entities_of_its_side_only() -> None:
    """Validation is disjoint from test and from train; ood draws test entities only."""
    for t in TASKS:
        sides = {splits.side_of(e) for e in t["entities"]}
        assert sides == ({Split.TEST} if t["split"] == "ood" else {t["split"]}), t["task_id"]


def test_the_rollout_pool_holds_fresh_train_entities_only() -> None:
    """The pool's tasks are train, about pool entities only; no bank task (a train task
    outside the pool) names one, so no pool (template, entity) is ever a bank task's."""
    pool = [t for t in TASKS if "pool" in t]
    bank = [t for t in _of("train") if "pool" not in t]
    assert len(pool) >= 128 and {t["pool"] for t in pool} == {ROLLOUT_POOL}
    assert {t["split"] for t in pool} == {"train"}
    assert all(t["reference_actions"] and t["entities"] for t in pool)
    for t in pool:
        assert all(map(splits.in_pool, t["entities"])), t["task_id"]
    for t in bank:
        assert not any(map(splits.in_pool, t["entities"])), t["task_id"]
    pairs = {(t["template"], e) for t in bank for e in t["entities"]}
    assert not [t["task_id"] for t in pool if {(t["template"], e) for e in t["entities"]} & pairs]
    # every site and band, most templates (no price-filter pair and no staff-login thread is
    # a pool one), and every template with a pool keeps bank tasks too
    assert {t["domain"] for t in pool} == SITES
    assert {band_of(t["difficulty"]) for t in pool} == BANDS
    per_template = Counter(t["template"] for t in pool)
    assert len(per_template) >= 15, per_template
    assert len(bank) > len(pool) and all(
        any(b["template"] == template for b in bank) for template in per_template)


def test_ood_templates_are_never_in_train_or_test() -> None:
    ood = {t["template"] for t in _of("ood")}
    assert ood == splits.OOD_TEMPLATES and 2 <= len(ood) <= 4
    assert ood & {t["template"] for t in TASKS if t["split"] != "ood"} == set()


def test_counts_per_split_site_and_band() -> None:
    assert 300 <= len(TASKS) <= 700
    per_template = Counter(t["template"] for t in TASKS)
    assert 12 <= len(per_template) <= 24 and min(per_template.values()) >= 10, per_template
    for split in ("train", "test"):
        tasks = _of(split)
        assert len(tasks) >= 100, split
        assert {t["domain"] for t in tasks} == SITES, split
        assert {band_of(t["difficulty"]) for t in tasks} == BANDS, split
        for template in per_template.keys() - splits.OOD_TEMPLATES:
            assert any(t["template"] == template for t in tasks), (split, template)
    assert len(_of("ood")) >= 40
    # Validation: a tenth of the entities, so fewer tasks, but on every site and band.
    assert 40 <= len(_of("validation")) < len(_of("test"))
    assert {t["domain"] for t in _of("validation")} == SITES
    assert {band_of(t["difficulty"]) for t in _of("validation")} == BANDS
    for site in SITES:
        assert {band_of(t["difficulty"]) for t in TASKS if t["domain"] == site} == BANDS, site
    # Roughly a quarter of the entities are held out; a task mixing in one goes to test.
    everything = {e for t in TASKS for e in t["entities"]}
    share = sum(map(splits.is_test_entity, everything)) / len(everything)
    assert 0.15 <= share <= 0.40, share


def test_longer_references_for_harder_bands() -> None:
    mean = {}
    for band in ("easy", "medium", "hard"):
        lengths = [len(t["reference_actions"]) for t in TASKS if band_of(t["difficulty"]) == band]
        mean[band] = sum(lengths) / len(lengths)
    assert mean["easy"] < mean["medium"] < mean["hard"], mean


def test_readme_table_is_current() -> None:
    assert summary_table(TASKS) in README.read_text(encoding="utf-8")
