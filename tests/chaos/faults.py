"""The faults a chaos scenario injects mid-iteration, each a coroutine over a `Run`.

Every wait inside a fault is bounded; a fault that cannot do its part leaves a note in the
run (reported with the scenario) instead of hanging.
"""

from __future__ import annotations

import asyncio
import os
import signal

from harness.outcomes import Moment, moment
from infra import stack
from infra.procs import ManagedProcess
from tests.chaos.harness import Fault, Run

OUTAGE_S = 20.0


def kill_and_restart(kind: str, seed: int) -> Fault:
    """SIGKILL the process of this kind at a seeded moment, then start a new one at once."""

    async def fault(run: Run) -> None:
        at = moment(kind, seed, run.options.episodes, run.options.contexts)
        run.note(f"will SIGKILL {kind} {at}")
        await run.until(at)
        if kind == "controller" and run.current("controller").exited() is not None:
            # Restarting it now would run a second iteration, not resume this one.
            run.note("the controller had already closed the iteration: not killed")
            return
        await run.kill_and_restart(kind)

    return fault


def rebalance(seed: int) -> Fault:
    """Add a 2nd and a 3rd browser worker, then SIGTERM the 2nd and SIGKILL the 1st."""

    async def fault(run: Run) -> None:
        n, f = run.options.episodes, run.options.contexts
        first, second, third, fourth = sorted(
            moment(f"rebalance{i}", seed, n, f).after_completed for i in range(4))
        await run.until(Moment(first, 0.0))
        await run.restart("browser", contexts=4)
        await run.until(Moment(second, 0.5))
        await run.restart("browser", contexts=4)
        await run.until(Moment(third, 0.5))
        await run.terminate("browser", index=1)
        await run.until(Moment(fourth, 1.0))
        run.kill("browser", index=0)

    return fault


def component(run: Run, prefix: str) -> list[str]:
    """The stack's components by name prefix (one `kafka`, or one per broker)."""
    return [c.name for c in stack.components(run.base) if c.name.startswith(prefix)]


def minio_outage(seed: int, outage_s: float = OUTAGE_S) -> Fault:
    """Stop MinIO for `outage_s` mid-iteration, then start it again."""

    async def fault(run: Run) -> None:
        await run.until(moment("minio", seed, run.options.episodes, run.options.contexts))
        proc = ManagedProcess("minio", run.base.infra.data_dir)
        await asyncio.to_thread(proc.stop, run.base.infra.stop_timeout_s)
        run.note(f"MinIO stopped for {outage_s:.0f}s")
        await asyncio.sleep(outage_s)
        await asyncio.wait_for(stack.up(run.base, only=["minio"]), 120)
        run.note("MinIO back")

    return fault


def broker_restart(seed: int, down_s: float = 5.0) -> Fault:
    """SIGKILL the Kafka broker mid-iteration, start it again after `down_s`."""

    async def fault(run: Run) -> None:
        await run.until(moment("kafka", seed, run.options.episodes, run.options.contexts))
        names = component(run, "kafka")
        name = names[0]
        proc = ManagedProcess(name, run.base.infra.data_dir)
        pid = proc.pid()
        if pid is None:
            run.note(f"no {name} process to kill")
            return
        os.killpg(pid, signal.SIGKILL)
        run.note(f"SIGKILL broker {name} (pid {pid})")
        await asyncio.sleep(down_s)
        await asyncio.wait_for(stack.up(run.base, only=[name]), 180)
        run.note(f"broker {name} back")

    return fault


def vllm_outage(seed: int, outage_s: float = OUTAGE_S) -> Fault:
    """Stop vLLM for `outage_s` mid-iteration, then start it again (minutes on a CPU)."""

    async def fault(run: Run) -> None:
        await run.until(moment("vllm", seed, run.options.episodes, run.options.contexts))
        proc = ManagedProcess("vllm", run.base.infra.data_dir)
        await asyncio.to_thread(proc.stop, run.base.infra.stop_timeout_s)
        run.note(f"vLLM stopped for {outage_s:.0f}s")
        await asyncio.sleep(outage_s)
        await asyncio.wait_for(stack.up(run.base, only=["vllm"], with_vllm=True),
                               run.base.vllm.start_timeout_s + 30)
        run.note("vLLM back")

    return fault
