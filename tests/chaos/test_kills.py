"""SIGKILL each pipeline process at seeded moments of a 48-episode iteration, then restart it.

For every kind: every requested episode ends exactly once and is scored exactly once, the
sandbox sees each form post once, the task history counts each episode once, the DLQ stays
empty, and no other process stops. `make test` runs one moment for the browser worker and
the policy; `make chaos` three moments for every kind.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.chaos.faults import kill_and_restart
from tests.chaos.harness import Run, assert_exactly_once, play
from tests.chaos.scenario import Options

pytestmark = [pytest.mark.integration, pytest.mark.chaos,
              pytest.mark.asyncio(loop_scope="session")]

KINDS = ("browser", "policy", "evaluator", "history", "metrics", "controller", "replay")
SEEDS = (1, 2, 3)
# make test's subset: the two processes every step passes through, and the evaluator, whose
# restart (transactions aborted, stale batches sought back) is the most intricate
FAST = {("browser", 1), ("policy", 1), ("evaluator", 1)}
CASES = [pytest.param(kind, seed, id=f"{kind}-seed{seed}",
                      marks=[pytest.mark.chaos_fast] if (kind, seed) in FAST else [])
         for kind in KINDS for seed in SEEDS]


@pytest.mark.parametrize(("kind", "seed"), CASES)
async def test_sigkill_mid_iteration_loses_and_repeats_nothing(
    kind: str, seed: int, chaos_run: Callable[..., Run]
) -> None:
    # The replay processor joins the run when it is the one killed (its samples checked).
    run = chaos_run(f"SIGKILL {kind} (seed {seed})", Options(replay=kind == "replay"))
    result = await play(run, kill_and_restart(kind, seed))
    assert_exactly_once(result, run)
