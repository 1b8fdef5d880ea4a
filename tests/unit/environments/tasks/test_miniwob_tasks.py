"""The MiniWoB++ task file: one task per (environment, seed), split by seed, only supported
environments; the pages served from the miniwob package (the episodes run in
tests/integration/test_miniwob.py)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from environments.app import start_sandbox
from environments.miniwob import html_dir, page_path
from environments.tasks.miniwob_tasks import (
    ONE_SOLUTION,
    OOD,
    OUTPUT,
    ROLLOUT_SEEDS,
    SUPPORTED,
    TEST_SEEDS,
    TRAIN_SEEDS,
    UNSUPPORTED,
    VALIDATION_SEEDS,
    all_tasks,
    load_references,
)
from infra.procs import free_port
from webgym_common.choices import Split, Suite
from webgym_common.tasks import band_of, in_rollout_pool, in_split, read_task_file, suite_of

TASKS, BAD = read_task_file(OUTPUT)


def test_the_file_is_up_to_date_and_loads_without_bad_lines() -> None:
    lines = [json.loads(ln) for ln in OUTPUT.read_text(encoding="utf-8").splitlines()]
    assert lines == all_tasks(), "stale: python -m environments.tasks.miniwob_tasks"
    assert not BAD and len(TASKS) == len(lines)
    assert len({t.task_id for t in TASKS}) == len(TASKS)


def test_unsupported_environments_never_appear_and_each_says_why() -> None:
    envs = {t.environment.name for t in TASKS if t.environment is not None}
    assert envs == set(SUPPORTED) | set(OOD)
    assert not envs & set(UNSUPPORTED)
    assert all(len(reason) > 10 for reason in UNSUPPORTED.values())
    pages = html_dir()
    assert pages is not None, "the miniwob package is not installed"
    for env in [*envs, *UNSUPPORTED]:  # every name is a real page of the package
        assert (pages / "miniwob" / f"{env}.html").is_file(), env


def test_one_task_per_environment_and_seed_split_by_seed() -> None:
    for t in TASKS:
        env = t.environment
        assert env is not None and env.kind == "miniwob" and t.subdomain == env.name
        assert suite_of(t) == Suite.MINIWOB and band_of(t.difficulty).value == "easy"
        assert t.website == "{sandbox}" + page_path(env.name) and not t.evaluator_reference
        assert t.definite_answer is None and str(env.seed) in t.task_name
        expected = (Split.OOD if env.name in OOD else
                    Split.TRAIN if env.seed in (*TRAIN_SEEDS, *ROLLOUT_SEEDS) else
                    Split.VALIDATION if env.seed in VALIDATION_SEEDS else Split.TEST)
        assert t.split == expected and in_split(t, expected)
        assert in_rollout_pool(t) == (env.seed in ROLLOUT_SEEDS)
        assert env.seed in {Split.TRAIN: (*TRAIN_SEEDS, *ROLLOUT_SEEDS),
                            Split.VALIDATION: VALIDATION_SEEDS}.get(expected, TEST_SEEDS)
        assert env.name not in ONE_SOLUTION or env.seed in TRAIN_SEEDS
    held_out = len(SUPPORTED) - len(ONE_SOLUTION)
    per_split = Counter(t.split for t in TASKS)
    assert per_split == {"train": len(SUPPORTED) * len(TRAIN_SEEDS)
                         + held_out * len(ROLLOUT_SEEDS),
                         "validation": held_out * len(VALIDATION_SEEDS),
                         "test": held_out * len(TEST_SEEDS),
                         "ood": len(OOD) * len(TEST_SEEDS)}


def test_one_solution_lists_the_environments_whose_every_reference_is_the_same() -> None:
    solutions: dict[str, set[str]] = {}
    for task_id, steps in load_references().items():
        env = task_id.removeprefix("miniwob-").rsplit("-", 1)[0]
        solutions.setdefault(env, set()).add(json.dumps(steps, sort_keys=True))
    assert {env for env, s in solutions.items() if len(s) == 1} == ONE_SOLUTION


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox() -> AsyncIterator[httpx.AsyncClient]:
    port = free_port()
    runner = await start_sandbox("127.0.0.1", port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            yield c
    finally:
        await runner.cleanup()


@pytest.mark.asyncio(loop_scope="session")
async def test_the_sandbox_serves_the_pages_read_only(sandbox: httpx.AsyncClient) -> None:
    page = await sandbox.get(page_path("click-button"))
    assert page.status_code == 200 and "../core/core.js" in page.text
    core = await sandbox.get("/miniwob/core/core.js")
    assert core.status_code == 200 and "WOB_RAW_REWARD_GLOBAL" in core.text
    assert (await sandbox.get("/miniwob/")).status_code in (403, 404)  # no listing
    assert (await sandbox.get("/miniwob/../pyproject.toml")).status_code == 404
    assert (await sandbox.post(page_path("click-button"))).status_code == 405
