"""Dependencies failing mid-iteration: MinIO stopped for 20 s, the broker killed and
restarted, vLLM stopped for 20 s.

Nothing is lost or counted twice; an episode that cannot go on ends with an explicit
reason; every process recovers by itself (none stops, none is restarted by the harness).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest

from infra import stack
from infra.procs import InfraError, free_port
from tests.chaos.faults import broker_restart, minio_outage, vllm_outage
from tests.chaos.harness import Run, assert_exactly_once, play
from tests.chaos.scenario import Options
from webgym_common.config import Settings

pytestmark = [pytest.mark.integration, pytest.mark.chaos,
              pytest.mark.asyncio(loop_scope="session")]


@pytest.mark.parametrize("seed", [1, 2])
async def test_minio_stopped_for_20s(seed: int, chaos_run: Callable[..., Run]) -> None:
    run = chaos_run(f"MinIO stopped 20 s (seed {seed})")
    result = await play(run, minio_outage(seed))
    assert_exactly_once(result, run)


@pytest.mark.parametrize("seed", [1, 2])
async def test_broker_killed_and_restarted(seed: int, chaos_run: Callable[..., Run]) -> None:
    run = chaos_run(f"Kafka broker SIGKILL + restart (seed {seed})")
    result = await play(run, broker_restart(seed))
    assert_exactly_once(result, run)


@pytest.fixture(scope="module")
def vllm_stack(chaos_stack: Settings) -> Iterator[Settings]:
    """The chaos stack plus a real vLLM on the CPU (SmolLM2-135M): slow, so few episodes."""
    port = free_port()
    settings = chaos_stack.model_copy(update={
        "vllm": chaos_stack.vllm.model_copy(update={"port": port}),
        "policy": chaos_stack.policy.model_copy(
            update={"base_url": f"http://{chaos_stack.infra.host}:{port}/v1"}),
    })
    try:
        asyncio.run(stack.up(settings, only=["vllm"], with_vllm=True))
    except InfraError as err:
        pytest.skip(f"vLLM cannot start here: {err}")
    yield settings
    # chaos_stack's teardown stops it with the rest (down() includes vLLM).


@pytest.mark.timeout(1800)
async def test_vllm_stopped_for_20s(vllm_stack: Settings, chaos_run: Callable[..., Run]) -> None:
    # The vLLM policy on this CPU takes seconds per decision: 8 short episodes, 4 at a time.
    # The model rarely solves a task, so side effects are only checked for duplicates.
    options = Options(episodes=8, contexts=4, policy="vllm", bound_s=1200,
                      tasks=("shop-012", "forum-007", "travel-008", "forum-011"))
    run = chaos_run("vLLM stopped 20 s (vLLM policy)", options, base=vllm_stack)
    result = await play(run, vllm_outage(1))
    assert_exactly_once(result, run)
