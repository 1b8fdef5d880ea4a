"""The demonstration bank's task choice and the held-out guard (webgym_common/demonstrations.py),
on the project's real task files."""

from __future__ import annotations

from pathlib import Path

import pytest

from webgym_common.demonstrations import (
    bank_episode_id,
    bank_tasks,
    held_out_leaks,
    parse_bank_episode_id,
)
from webgym_common.events import Task
from webgym_common.tasks import read_task_file

FILES = ("miniwob_tasks.jsonl", "generated_tasks.jsonl", "sandbox_tasks.jsonl")


@pytest.fixture(scope="module")
def catalog() -> dict[str, Task]:
    tasks: dict[str, Task] = {}
    for name in FILES:
        read, bad = read_task_file(Path("infra/sandbox/tasks") / name)
        assert not bad
        tasks.update({t.task_id: t for t in read})
    return tasks


def test_the_bank_is_every_train_reference_and_touches_nothing_held_out(
        catalog: dict[str, Task]) -> None:
    chosen = bank_tasks(catalog.values())
    assert {t.split for t in chosen} == {"train"}
    assert all(t.reference_actions for t in chosen)
    with_refs = [t for t in catalog.values() if t.split == "train" and t.reference_actions]
    assert len(chosen) == len(with_refs) >= 900
    assert held_out_leaks([t.task_id for t in chosen], catalog) == []
    assert {t.task_id for t in bank_tasks(catalog.values(), ["miniwob"])} == {
        t.task_id for t in chosen if t.environment is not None}


def test_every_kind_of_leak_is_named(catalog: dict[str, Task]) -> None:
    test_seed = next(t for t in catalog.values()
                     if t.split == "test" and t.environment is not None)
    ood_env = next(t for t in catalog.values() if t.split == "ood" and t.environment)
    test_entity = next(t for t in catalog.values()
                       if t.split == "test" and t.task_id.startswith("gen-"))
    leaks = held_out_leaks([test_seed.task_id, ood_env.task_id, test_entity.task_id,
                            "no-such-task"], catalog)
    text = "\n".join(leaks)
    assert f"{test_seed.task_id}: a test task" in text
    assert f"shares env:{test_seed.environment.name}:seed:{test_seed.environment.seed}" in text
    assert f"{ood_env.task_id}: its group {ood_env.environment.name} is out of distribution" \
        in text
    assert f"{test_entity.task_id}: shares entity:" in text
    assert "no-such-task: not in the catalog" in text


def test_a_train_task_sharing_a_held_out_entity_is_a_leak(catalog: dict[str, Task]) -> None:
    held = next(t for t in catalog.values() if t.split == "test" and t.task_id.startswith("gen-"))
    twin = held.model_copy(update={"task_id": "gen-twin", "split": "train"})
    leaks = held_out_leaks(["gen-twin"], {**catalog, "gen-twin": twin})
    assert leaks and all("entity:" in x for x in leaks)


def test_bank_episode_ids_carry_the_prompt_version_and_task() -> None:
    eid = bank_episode_id("p2", 7, "miniwob-click-test-3")
    assert eid == "train-bankp2-0007-miniwob-click-test-3"
    assert parse_bank_episode_id(eid) == ("p2", "miniwob-click-test-3")
    assert parse_bank_episode_id("train-it0-0007-x") is None
