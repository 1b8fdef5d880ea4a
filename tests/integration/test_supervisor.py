"""`webgym pipeline up` supervises: a SIGKILLed process comes back, `down` leaves nothing.

Real processes on the real embedded stack, driven through the CLI as a user would.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from infra.procs import pid_alive
from producers.catalog import load_tasks
from producers.controller.rollout import run_iteration
from tests.support.pipeline_cli import pid_of, ready, row, webgym
from webgym_common.choices import SamplingStrategy
from webgym_common.config import Settings
from webgym_common.stream.bus import EventProducer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
SANDBOX = Path("environments/tasks/sandbox_tasks.jsonl")


async def test_a_killed_process_is_restarted_and_down_stops_everything(
    settings: Settings, tmp_path: Path,
) -> None:
    rollout_cfg = settings.rollout.model_copy(update={
        "completion_threshold": 1.0, "grace_period_s": 30.0, "score_wait_s": 90.0,
        "task_timeout_minutes": 5.0, "seed": 3, "strategy": SamplingStrategy.UNIFORM})
    s = settings.model_copy(update={"rollout": rollout_cfg})
    try:
        up = webgym(s, "pipeline", "up", "--policy", "teacher", "--contexts", "2")
        assert up.returncode == 0, up.stdout + up.stderr
        names = ["browser", "policy", "evaluator", "history", "metrics"]
        pids = {n: pid_of(s, n) for n in names}
        assert all(pids.values()) and all(ready(s, n) for n in names)
        supervisor = int((s.infra.data_dir / "run" / "pipeline-supervisor.pid").read_text())

        os.killpg(pids["policy"], signal.SIGKILL)
        async with asyncio.timeout(120):
            while pid_of(s, "policy") in (None, pids["policy"]) or not ready(s, "policy"):  # noqa: ASYNC110 (polls files)
                await asyncio.sleep(0.3)
        assert not pid_alive(pids["policy"]) and pid_alive(pid_of(s, "policy") or 0)
        status = webgym(s, "pipeline", "status")
        assert status.returncode == 0, status.stdout  # every process ready again
        policy = row(status.stdout, "policy")
        assert str(pid_of(s, "policy")) in policy and "ready" in policy
        assert " 1 " in policy and "SIGKILL" in policy
        for other in ("browser", "evaluator", "history", "metrics"):
            assert pid_of(s, other) == pids[other] and " 0 " in row(status.stdout, other)

        # The restarted policy serves: a short iteration (of train tasks) ends with every
        # episode scored.
        lines = [json.loads(x) for x in SANDBOX.read_text().splitlines()]  # noqa: ASYNC240
        tasks = [x for x in lines if x["task_id"] in ("shop-003", "wiki-003", "forum-003")]
        (tmp_path / "t.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
        async with EventProducer(s, client_id="test") as producer:
            assert not (await load_tasks(tmp_path / "t.jsonl", producer)).bad
            async with asyncio.timeout(300):
                _, closed = await run_iteration(s, producer, 0, "train", len(tasks))
        assert closed.completed == len(tasks) and closed.crashed == 0
        running = [pid_of(s, n) for n in names]
    finally:
        down = webgym(s, "pipeline", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert not pid_alive(supervisor)
    assert not any(pid_alive(p) for p in running if p)
    await asyncio.sleep(2.0)  # four times the backoff: a restart after `down` would show
    assert not list((s.infra.data_dir / "run").glob("pipeline-*.pid"))
    after = webgym(s, "pipeline", "status")
    assert after.returncode == 1 and "supervisor: not running" in after.stdout
    assert all("stopped" in row(after.stdout, n) for n in names)
