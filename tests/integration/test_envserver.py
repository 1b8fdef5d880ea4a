"""`webgym envserver` end to end: an AgentGym-style client over HTTP, the real server process,
real browser workers (Chromium), the evaluator, Kafka and MinIO; and the 50-env leak test."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from harness.agentgym_client import AgentGymClient, reference_reply
from harness.launch import PipelineProcess
from infra.procs import free_port
from producers.catalog import load_tasks
from webgym_common.config import Settings
from webgym_common.events import EpisodeCompleted, EpisodeScored
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.readers import read_events
from webgym_common.tasks import read_task_file
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
SANDBOX = Path("environments/tasks/sandbox_tasks.jsonl")
TASKS, _ = read_task_file(SANDBOX)
IDX = {t.task_id: i for i, t in enumerate(sorted(TASKS, key=lambda t: t.task_id))}
BY_ID = {t.task_id: t for t in TASKS}


def with_envserver(settings: Settings, **cfg: object) -> Settings:
    return settings.model_copy(update={"envserver": settings.envserver.model_copy(
        update={"port": free_port(), **cfg})})


@pytest.fixture
def envserver(settings: Settings, tmp_path: Path) -> Iterator:
    procs: list[PipelineProcess] = []

    def start(**cfg: object) -> tuple[PipelineProcess, str]:
        s = with_envserver(settings, **cfg)
        p = PipelineProcess(s, ["envserver"], tmp_path / f"envserver{len(procs)}.log")
        procs.append(p)
        return p, f"http://127.0.0.1:{s.envserver.port}"

    yield start
    for p in procs:
        p.stop()


async def ready(*procs: PipelineProcess, timeout_s: float = 90) -> None:
    async with asyncio.timeout(timeout_s):
        while not all(p.is_ready() for p in procs):  # noqa: ASYNC110 (ready files)
            for p in procs:
                assert p.proc.poll() is None, p.log_text()[-3000:]
            await asyncio.sleep(0.2)


async def solve(client: AgentGymClient, task_id: str) -> dict:
    """Create, reset, step the reference actions in WebArena syntax until stop, close."""
    task = BY_ID[task_id]
    await client.create()
    reset = await client.reset(IDX[task_id])
    assert reset["object"] == task.task_name and reset["sites"] == [task.domain]
    observation = reset["observation"]
    assert observation.startswith("OBSERVATION:\n") and "\nURL: " in observation
    assert "PREVIOUS ACTION: None" in observation
    for ref in task.reference_actions:
        result = await client.step(reference_reply(ref, observation))
        assert "error" not in result["info"] or not result["info"]["error"], result
        observation = result["observation"]
        if result["terminated"]:
            break
    assert await client.observe() == observation
    assert await client.close() == {"closed": "closed"}
    return result


async def test_agentgym_client_solves_sandbox_tasks_through_the_env_server(
    settings: Settings, producer: EventProducer, start_worker, envserver, tmp_path: Path
) -> None:
    started = time.monotonic()
    report = await load_tasks(SANDBOX, producer)
    assert not report.bad
    worker = start_worker(3)
    evaluator = PipelineProcess(settings, ["worker", "evaluator"], tmp_path / "evaluator.log")
    try:
        server, url = envserver()
        await ready(worker, evaluator, server)
        async with aiohttp.ClientSession() as http:
            async with http.get(url + "/") as response:
                assert await response.text() == "ok"
            clients = [AgentGymClient(http, url) for _ in range(3)]
            solving = [asyncio.create_task(solve(c, t))
                       for c, t in zip(clients, ["shop-001", "wiki-001", "shop-003"], strict=True)]
            # Bad requests meanwhile: clear errors, and the envs being solved go on.
            await asyncio.sleep(1.0)
            async with http.post(url + "/step", data=b"{oops") as response:
                assert response.status == 400
                assert "malformed JSON" in (await response.json())["error"]
            async with http.post(url + "/step", json={"env_idx": 12345, "action": "x"}) as r:
                assert r.status == 404 and "unknown env_idx" in (await r.json())["error"]
            async with http.post(url + "/reset", json={"env_idx": 0}) as response:
                assert response.status in (400, 409)  # missing idx (or env 0 is busy)
            results = await asyncio.wait_for(asyncio.gather(*solving), 240)
            async with http.get(url + "/list_envs") as response:
                assert await response.json() == []
    finally:
        evaluator.stop()
    for result in results:
        assert result["terminated"] and result["reward"] == 1.0, result
        assert result["info"]["termination"] == "answer"
    # The env-server episodes are the pipeline's: scored like any other (history, replay
    # and the monitor fold the same events).
    ids = {r["info"]["episode_id"] for r in results}
    scored = await read_events(settings, Topic.EPISODES_SCORED, 3, producer, timeout_s=30)
    assert {s.event.episode_id for s in scored} == ids
    assert all(isinstance(s.event, EpisodeScored) and s.event.policy_version == "envserver"
               and s.event.reward == 1.0 for s in scored)
    print(f"\n3 sandbox tasks through the env server in {time.monotonic() - started:.1f} s")


def context_counts(worker: PipelineProcess) -> list[int]:
    return [int(n) for n in re.findall(r"open contexts: (\d+)", worker.log_text())]


async def test_fifty_abandoned_envs_are_reaped_and_leave_no_browser_context(
    settings: Settings, producer: EventProducer, start_worker, envserver
) -> None:
    report = await load_tasks(SANDBOX, producer)
    assert not report.bad
    worker = start_worker(6)
    server, url = envserver(idle_timeout_s=6.0, reap_interval_s=1.0, reset_timeout_s=10.0)
    await ready(worker, server)
    async with aiohttp.ClientSession() as http:
        clients = [AgentGymClient(http, url) for _ in range(50)]
        for client in clients:
            await client.create()
        resets = await asyncio.gather(*(c.reset(IDX["shop-001"]) for c in clients))
        opened = sum(r["observation"].startswith("OBSERVATION:") for r in resets)
        assert opened >= 1  # as many as the worker has contexts; the rest are queued
        assert all(r["observation"] in ("TimeoutError",) or r["observation"].startswith(
            "OBSERVATION:") for r in resets)
        async with asyncio.timeout(10):
            while max(context_counts(worker), default=0) == 0:  # noqa: ASYNC110 (a log)
                await asyncio.sleep(0.5)
        peak = max(context_counts(worker))
        # Abandoned: no step, no close. The reaper closes them after 6 s idle.
        async with asyncio.timeout(60):
            while True:
                async with http.get(url + "/list_envs") as response:
                    if await response.json() == []:
                        break
                await asyncio.sleep(0.5)
    completions = await read_events(settings, Topic.EPISODES_COMPLETED, 50, producer,
                                    timeout_s=90)
    assert len({c.event.episode_id for c in completions}) == 50
    assert all(isinstance(c.event, EpisodeCompleted) and c.event.termination == "cancelled"
               for c in completions), {c.event.termination for c in completions}
    async with asyncio.timeout(20):
        while context_counts(worker)[-1] != 0:  # noqa: ASYNC110 (a log)
            await asyncio.sleep(0.5)
    await asyncio.sleep(2.5)  # and it stays there
    assert context_counts(worker)[-1] == 0
    print(f"\nleak test: {opened} of 50 resets opened a page, peak {peak} open contexts, "
          f"0 after the reap; {json.dumps(server.log_text().count('idle for'))} envs reaped")
