"""The leak guard (webgym_common/leaks.py) on the project's real task files: every kind of mark
is caught, nothing the guard lets train shares one with a held-out task."""

from __future__ import annotations

import pytest

from tests.unit.catalog import real_catalog
from webgym_common.choices import Suite
from webgym_common.demonstrations import bank_tasks
from webgym_common.events import Task
from webgym_common.leaks import (
    LeakGuard,
    held_out_leaks,
    marks_of,
    novel_solution,
    solution_of,
    train_solutions,
)
from webgym_common.tasks import entities_of, group_of, in_rollout_pool, suite_of

HELD_OUT = ("test", "validation", "ood")


@pytest.fixture(scope="module")
def catalog() -> dict[str, Task]:
    return real_catalog()


def twin(task: Task, **update: object) -> Task:
    """A train task that copies `task` under another id (and whatever `update` says)."""
    return Task.model_validate({**task.model_dump(), "task_id": f"twin-{task.task_id}",
                                "split": "train", **update})


def test_every_task_of_the_real_files_has_a_split(catalog: dict[str, Task]) -> None:
    assert {t.split for t in catalog.values()} == {"train", "validation", "test", "ood"}


def test_nothing_the_guard_lets_train_shares_a_mark_with_a_held_out_task(
        catalog: dict[str, Task]) -> None:
    guard = LeakGuard.of(catalog)
    trainable = [t for t in catalog.values() if guard.trainable(t.task_id)]
    held = [t for t in catalog.values() if t.split in HELD_OUT]
    assert trainable and held and all(t.split == "train" for t in trainable)
    held_marks = set().union(*(marks_of(t) for t in held))
    assert not [t.task_id for t in trainable if marks_of(t) & held_marks]
    held_solutions = {solution_of(t) for t in held} - {None}
    assert not [t.task_id for t in trainable if solution_of(t) in held_solutions]
    assert not {group_of(t) for t in trainable} & {group_of(t) for t in held if t.split == "ood"}


def test_the_rollout_pools_are_train_tasks_clear_of_held_out_and_bank_marks(
        catalog: dict[str, Task]) -> None:
    """Both suites have a rollout pool of at least 128 train tasks the guard lets train (an
    iteration's episodes); the sandbox's shares no mark with a held-out task at all (a
    MiniWoB++ rollout seed may repeat a held-out seed's solution: the guard refuses it), and
    no sandbox pool task shares a template and entity with a task of the bank."""
    guard = LeakGuard.of(catalog)
    pool = [t for t in catalog.values() if in_rollout_pool(t)]
    assert {t.split for t in pool} == {"train"}
    per_suite = {suite: [t for t in pool if suite_of(t) == suite]
                 for suite in (Suite.MINIWOB, Suite.SANDBOX)}
    trainable = {suite: sum(guard.trainable(t.task_id) for t in tasks)
                 for suite, tasks in per_suite.items()}
    assert min(trainable.values()) >= 128, trainable
    assert trainable[Suite.SANDBOX] == len(per_suite[Suite.SANDBOX])
    bank = bank_tasks(catalog.values())
    assert not {t.task_id for t in bank} & {t.task_id for t in pool}
    banked = {(group_of(t), e) for t in bank for e in entities_of(t)}
    assert not [t.task_id for t in per_suite[Suite.SANDBOX]
                if {(group_of(t), e) for e in entities_of(t)} & banked]


def test_the_solution_mark_refuses_train_tasks_a_held_out_task_repeats(
        catalog: dict[str, Task]) -> None:
    # MiniWoB++'s click-tab has three solutions, all among its held-out seeds: no train seed
    # of it may train; click-option has one solution a seed, so its train seeds may
    guard = LeakGuard.of(catalog)
    tab = [t for t in catalog.values()
           if t.subdomain == "click-tab" and t.split == "train" and t.reference_actions]
    option = [t for t in catalog.values()
              if t.subdomain == "click-option" and t.split == "train" and t.reference_actions]
    assert tab and not [t for t in tab if guard.trainable(t.task_id)]
    assert any("shares solution:" in r for r in guard.reasons(tab[0].task_id))
    assert option and all(guard.trainable(t.task_id) for t in option)


def test_every_kind_of_leak_is_named(catalog: dict[str, Task]) -> None:
    test_seed = next(t for t in catalog.values()
                     if t.split == "test" and t.environment is not None)
    validation_seed = next(t for t in catalog.values()
                           if t.split == "validation" and t.environment is not None)
    ood_env = next(t for t in catalog.values() if t.split == "ood" and t.environment)
    entity = next(t for t in catalog.values()
                  if t.split == "test" and t.task_id.startswith("gen-"))
    solved = next(t for t in catalog.values() if t.split == "test" and t.reference_actions
                  and t.environment is None)
    # another id, another entity: only the reference is the held-out task's
    copy = twin(solved, extra_json='{"template": "copy", "entities": []}')
    leaks = "\n".join(held_out_leaks(
        [test_seed.task_id, validation_seed.task_id, ood_env.task_id, entity.task_id,
         copy.task_id, "no-such-task"], {**catalog, copy.task_id: copy}))
    assert f"{test_seed.task_id}: a test task" in leaks
    assert f"{validation_seed.task_id}: a validation task" in leaks
    assert f"shares env:{test_seed.environment.name}:seed:{test_seed.environment.seed}" in leaks
    assert f"{ood_env.task_id}: its group {ood_env.environment.name} is out of distribution" \
        in leaks
    assert f"{entity.task_id}: shares entity:" in leaks
    assert f"{copy.task_id}: shares solution:" in leaks
    assert "no-such-task: not in the catalog" in leaks


def test_a_train_task_sharing_a_held_out_entity_is_a_leak(catalog: dict[str, Task]) -> None:
    held = next(t for t in catalog.values() if t.split == "test" and t.task_id.startswith("gen-"))
    copy = twin(held, reference_actions=[])
    leaks = held_out_leaks([copy.task_id], {**catalog, copy.task_id: copy})
    assert leaks and all("entity:" in x for x in leaks)


def test_a_task_without_a_split_never_trains(catalog: dict[str, Task]) -> None:
    train = next(t for t in catalog.values()
                 if t.split == "train" and LeakGuard.of(catalog).trainable(t.task_id))
    legacy = Task.model_validate({**train.model_dump(), "split": None})
    assert LeakGuard.of({**catalog, train.task_id: legacy}).reasons(train.task_id) == [
        f"{train.task_id}: a split-less task"]


def test_novel_solutions_are_the_held_out_ones_no_train_task_has(
        catalog: dict[str, Task]) -> None:
    solutions = train_solutions(catalog.values())
    test = [t for t in catalog.values() if t.split == "test"]
    novel = [t for t in test if novel_solution(t, solutions)]
    assert 0 < len(novel) < len(test)
    assert all(solution_of(t) not in solutions for t in novel)
    assert not any(novel_solution(t, solutions) for t in test if not t.reference_actions)
