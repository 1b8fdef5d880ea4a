"""The demonstration bank's task choice (webgym_common/demonstrations.py), on the project's real
task files."""

from __future__ import annotations

import pytest

from tests.unit.catalog import real_catalog
from webgym_common.choices import Suite
from webgym_common.demonstrations import bank_episode_id, bank_tasks, parse_bank_episode_id
from webgym_common.events import Task
from webgym_common.leaks import LeakGuard, held_out_leaks
from webgym_common.tasks import in_rollout_pool, suite_of


@pytest.fixture(scope="module")
def catalog() -> dict[str, Task]:
    return real_catalog()


def test_the_bank_is_every_train_reference_the_guard_allows_and_touches_nothing_held_out(
        catalog: dict[str, Task]) -> None:
    chosen = bank_tasks(catalog.values())
    assert {t.split for t in chosen} == {"train"}
    assert all(t.reference_actions for t in chosen)
    guard = LeakGuard.of(catalog)
    with_refs = [t for t in catalog.values() if t.split == "train" and t.reference_actions
                 and not in_rollout_pool(t)]  # fresh tasks are the policy's alone
    allowed = [t for t in with_refs if guard.trainable(t.task_id)]
    assert len(chosen) == len(allowed) >= 600
    fresh = [t for t in catalog.values() if in_rollout_pool(t) and t.reference_actions]
    assert {suite_of(t) for t in fresh} == {Suite.MINIWOB, Suite.SANDBOX}  # both have a pool
    assert not {t.task_id for t in chosen} & {t.task_id for t in fresh}
    assert len(allowed) < len(with_refs)  # train references that a held-out task shares
    assert held_out_leaks([t.task_id for t in chosen], catalog) == []
    assert {t.task_id for t in bank_tasks(catalog.values(), ["miniwob"])} == {
        t.task_id for t in chosen if t.environment is not None}


def test_bank_episode_ids_carry_the_prompt_version_and_task() -> None:
    eid = bank_episode_id("p2", 7, "miniwob-click-test-3")
    assert eid == "train-bankp2-0007-miniwob-click-test-3"
    assert parse_bank_episode_id(eid) == ("p2", "miniwob-click-test-3")
    assert parse_bank_episode_id("train-it0-0007-x") is None
