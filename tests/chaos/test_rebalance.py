"""A rebalance under load: workers join and leave while episodes are in flight.

A 2nd and a 3rd browser worker join mid-iteration, then the 2nd is stopped with SIGTERM
(a clean hand-over) and the 1st with SIGKILL (no goodbye): every episode still ends once,
is scored once and posts each form once.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.chaos.faults import rebalance
from tests.chaos.harness import Run, assert_exactly_once, play

pytestmark = [pytest.mark.integration, pytest.mark.chaos,
              pytest.mark.asyncio(loop_scope="session")]


@pytest.mark.parametrize("seed", [1, 2])
async def test_workers_joining_and_leaving_lose_and_repeat_nothing(
    seed: int, chaos_run: Callable[..., Run]
) -> None:
    run = chaos_run(f"rebalance: +2 workers, SIGTERM one, SIGKILL one (seed {seed})")
    result = await play(run, rebalance(seed))
    assert_exactly_once(result, run)
