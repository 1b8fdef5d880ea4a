"""The stratified held-out set (heldout.py): groups, per-group draws, and its real sizes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from producers.controller.heldout import (
    HELDOUT_PER_GROUP,
    per_group_for,
    stratified_tasks,
)
from webgym_common.choices import Split, Suite
from webgym_common.events import PageEnvironment, Task
from webgym_common.leaks import novel_solution, train_solutions
from webgym_common.tasks import group_of, read_task_file

TASKS = Path("environments/tasks")


def miniwob(env: str, seed: int, split: str = "test") -> Task:
    return Task(task_id=f"miniwob-{env}-{seed}", task_name="t", domain="miniwob",
                subdomain=env, website="{sandbox}/", difficulty=1, split=split,
                benchmark_name="miniwob",
                environment=PageEnvironment(kind="miniwob", name=env, seed=seed))


def generated(template: str, n: int, split: str = "test") -> Task:
    return Task(task_id=f"gen-{template}-{n:03d}", task_name="t", domain="sandbox-shop",
                subdomain="lookup", website="{sandbox}/", difficulty=1, split=split,
                benchmark_name="webgym-sandbox-gen",
                extra_json=json.dumps({"template": template, "entities": ["x"]}))


def test_a_task_is_grouped_by_environment_else_template_else_subdomain() -> None:
    assert group_of(miniwob("click-tab", 3)) == "click-tab"
    assert group_of(generated("shop-price", 1)) == "shop-price"
    hand = Task(task_id="shop-001", task_name="t", domain="sandbox-shop",
                subdomain="product-lookup", website="{sandbox}/", difficulty=1,
                benchmark_name="webgym-sandbox")
    assert group_of(hand) == "product-lookup"
    assert group_of(hand.model_copy(update={"subdomain": None})) == "sandbox-shop"


def test_each_group_gives_per_group_tasks_and_a_small_group_gives_all() -> None:
    catalog = ([miniwob("a", s) for s in range(10)] + [miniwob("b", s) for s in range(3)]
               + [miniwob("c", s, "train") for s in range(10)])
    chosen = stratified_tasks(catalog, Suite.MINIWOB, Split.TEST, 5, seed=0)
    assert Counter(group_of(t) for t in chosen) == {"a": 5, "b": 3}  # no train task
    assert [t.task_id for t in chosen] == sorted(t.task_id for t in chosen)
    assert not stratified_tasks(catalog, Suite.SANDBOX, Split.TEST, 5, seed=0)


def test_the_draw_is_seeded_per_group_and_ignores_catalog_order_and_other_groups() -> None:
    a = [generated("p", i) for i in range(30)]
    b = [generated("q", i) for i in range(30)]
    first = stratified_tasks(a + b, Suite.SANDBOX, Split.TEST, 4, seed=1)
    assert first == stratified_tasks(list(reversed(b + a)), Suite.SANDBOX, Split.TEST, 4, 1)
    only_a = stratified_tasks(a, Suite.SANDBOX, Split.TEST, 4, seed=1)
    assert only_a == [t for t in first if group_of(t) == "p"]
    assert first != stratified_tasks(a + b, Suite.SANDBOX, Split.TEST, 4, seed=2)


def test_a_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        stratified_tasks([], Suite.SANDBOX, Split.TEST, 0, seed=0)


def test_one_count_or_each_suites_own() -> None:
    assert per_group_for(3, Suite.SANDBOX) == 3
    assert per_group_for(HELDOUT_PER_GROUP, Suite.MINIWOB) == 6
    assert per_group_for({Suite.MINIWOB: 2}, Suite.SANDBOX) == HELDOUT_PER_GROUP[Suite.SANDBOX]


@pytest.mark.parametrize(("suite", "path", "split", "size", "groups"), [
    (Suite.MINIWOB, "miniwob_tasks.jsonl", Split.TEST, 132, 22),
    (Suite.MINIWOB, "miniwob_tasks.jsonl", Split.OOD, 30, 5),
    (Suite.SANDBOX, "generated_tasks.jsonl", Split.TEST, 107, 17),
    (Suite.SANDBOX, "generated_tasks.jsonl", Split.OOD, 24, 3),
])
def test_the_held_out_sets_of_the_real_task_files_are_big_enough(
        suite: Suite, path: str, split: Split, size: int, groups: int) -> None:
    tasks, bad = read_task_file(TASKS / path)
    assert not bad
    chosen = stratified_tasks(tasks, suite, split, HELDOUT_PER_GROUP[suite], seed=0)
    assert len(chosen) == size and len({group_of(t) for t in chosen}) == groups
    assert {t.split for t in chosen} == {split}
    if split == Split.TEST:
        assert len(chosen) >= 100


def test_the_miniwob_test_set_holds_70_tasks_whose_solution_no_train_task_has() -> None:
    tasks, _ = read_task_file(TASKS / "miniwob_tasks.jsonl")
    chosen = stratified_tasks(tasks, Suite.MINIWOB, Split.TEST, HELDOUT_PER_GROUP[Suite.MINIWOB],
                              seed=0)
    solutions = train_solutions(tasks)
    assert sum(novel_solution(t, solutions) for t in chosen) >= 70
