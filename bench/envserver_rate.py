"""Env-server benchmark: steps/s through `webgym envserver` vs the same steps driven directly.

  .venv/bin/python -m bench.envserver_rate [--episodes-per-env 2] [--envs 1 8 16]

A throw-away embedded stack (free ports, temporary data), one browser worker with 16
contexts and the evaluator (rules judge). For each number of envs N, N lanes run at once,
each `--episodes-per-env` sandbox tasks in turn (shop-001, wiki-001, shop-003: two browser
steps and an answer each):

- server: an AgentGym-style client (harness/agentgym_client.py) per lane over HTTP:
  create, reset, the reference actions as WebArena replies, stop (the server waits for the
  evaluator's reward), close;
- direct: producers.drive_reference.drive, one episode at a time per lane (each call starts
  its own group-less reader, as `webgym drive` does), then the wait for the same episode's
  EpisodeScored (so both sides end at the reward); each request in the task's own split
  (shop-001 and wiki-001 test, shop-003 train), as the env server requests it.

Steps/s = actions sent (answers included) / wall time; the ratio is server / direct.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import typer
from rich.console import Console
from rich.table import Table

from harness.agentgym_client import AgentGymClient, reference_reply
from harness.launch import BrowserWorkerProcess, PipelineProcess
from harness.machine import describe_machine
from infra import stack
from infra.procs import free_port
from producers.catalog import load_tasks
from producers.drive_reference import drive, episode_request
from webgym_common.config import InfraSettings, Settings, load_settings
from webgym_common.events import EpisodeScored
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.tasks import read_task_file
from webgym_common.topics import Topic

console = Console(width=140)
SANDBOX = Path("environments/tasks/sandbox_tasks.jsonl")
TASK_IDS = ["shop-001", "wiki-001", "shop-003"]
CONTEXTS = 16


def bench_settings(data_dir: str) -> Settings:
    ports = {name: free_port() for name in (
        "kafka_port", "kafka_controller_port", "minio_port", "minio_console_port",
        "sandbox_port")}
    return load_settings(
        infra={"home": InfraSettings().home, "data_dir": data_dir, **ports},
        kafka={"partitions": 4, "topic_prefix": f"bench{uuid.uuid4().hex[:6]}"},
        envserver={"port": free_port(), "step_timeout_s": 120.0, "reset_timeout_s": 120.0},
    )


async def through_server(url: str, envs: int, per_env: int, idx: dict[str, int],
                         tasks: dict) -> int:
    steps = 0

    async def lane(http: aiohttp.ClientSession, lane_no: int) -> None:
        nonlocal steps
        client = AgentGymClient(http, url)
        for k in range(per_env):
            task = tasks[TASK_IDS[(lane_no + k) % len(TASK_IDS)]]
            await client.create()
            observation = (await client.reset(idx[task.task_id]))["observation"]
            for ref in task.reference_actions:
                result = await client.step(reference_reply(ref, observation))
                steps += 1
                observation = result["observation"]
                if result["terminated"]:
                    assert result["reward"] == 1.0, result
                    break
            await client.close()

    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        await asyncio.gather(*(lane(http, i) for i in range(envs)))
    return steps


async def directly(settings: Settings, producer: EventProducer, envs: int, per_env: int,
                   tasks: dict) -> int:
    scores: dict[str, asyncio.Future[EpisodeScored]] = {}
    reader = EventConsumer(settings, [Topic.EPISODES_SCORED], None, producer,
                           client_id="bench-scores")
    await reader.start(from_end=True)

    async def follow() -> None:
        async for received in reader.events(poll_timeout_ms=100):
            if isinstance(received.event, EpisodeScored):
                scores.setdefault(received.event.episode_id,
                                  asyncio.get_running_loop().create_future())
                if not scores[received.event.episode_id].done():
                    scores[received.event.episode_id].set_result(received.event)

    steps = 0

    async def lane(lane_no: int) -> None:
        nonlocal steps
        for k in range(per_env):
            task = tasks[TASK_IDS[(lane_no + k) % len(TASK_IDS)]]
            request = episode_request(task, split=task.split or "train")  # as the server
            scores.setdefault(request.episode_id, asyncio.get_running_loop().create_future())
            (episode,) = await drive(settings, [request], producer, timeout_s=600)
            steps += len(episode.actions)  # the answer included
            scored = await asyncio.wait_for(scores[request.episode_id], 120)
            assert scored.reward == 1.0, scored

    following = asyncio.create_task(follow())
    try:
        await asyncio.gather(*(lane(i) for i in range(envs)))
    finally:
        following.cancel()
        await reader.stop()
    return steps


async def run(settings: Settings, levels: list[int], per_env: int, logs: Path) -> list:
    await create_topics(settings)
    all_tasks, _ = read_task_file(SANDBOX)
    tasks = {t.task_id: t for t in all_tasks}
    idx = {t.task_id: i for i, t in enumerate(sorted(all_tasks, key=lambda t: t.task_id))}
    rows = []
    async with EventProducer(settings, client_id="bench") as producer:
        await load_tasks(SANDBOX, producer)
        worker = BrowserWorkerProcess(settings, CONTEXTS, logs / "worker.log")
        evaluator = PipelineProcess(settings, ["worker", "evaluator"], logs / "evaluator.log")
        server = PipelineProcess(settings, ["envserver"], logs / "envserver.log")
        procs = [worker, evaluator, server]
        try:
            async with asyncio.timeout(180):
                while not all(p.is_ready() for p in procs):  # noqa: ASYNC110 (ready files)
                    await asyncio.sleep(0.2)
            url = f"http://127.0.0.1:{settings.envserver.port}"
            await through_server(url, 1, 1, idx, tasks)  # warm-up: pages, fonts, caches
            for envs in levels:
                started = time.perf_counter()
                s_steps = await through_server(url, envs, per_env, idx, tasks)
                s_rate = s_steps / (time.perf_counter() - started)
                started = time.perf_counter()
                d_steps = await directly(settings, producer, envs, per_env, tasks)
                d_rate = d_steps / (time.perf_counter() - started)
                rows.append((envs, s_steps, s_rate, d_steps, d_rate))
                console.print(f"{envs} envs: server {s_rate:.2f} steps/s ({s_steps} steps), "
                              f"direct {d_rate:.2f} steps/s ({d_steps} steps)")
        finally:
            for p in procs:
                p.stop()
    return rows


def main(episodes_per_env: int = 2, envs: list[int] = typer.Option([1, 8, 16])) -> None:
    console.print(describe_machine())
    data_dir = tempfile.mkdtemp(prefix="bench-envserver-")
    settings = bench_settings(data_dir)
    load_before = os.getloadavg()[0]
    asyncio.run(stack.up(settings))
    try:
        rows = asyncio.run(run(settings, envs, episodes_per_env, Path(data_dir)))
    finally:
        stack.down(settings)
    table = Table(title=f"env server vs direct ({episodes_per_env} episodes per env, "
                        f"3 actions each; 1 worker x {CONTEXTS} contexts, rules evaluator)")
    for col in ("envs", "server steps/s", "direct steps/s", "server / direct"):
        table.add_column(col, justify="right")
    for n, _, s_rate, _, d_rate in rows:
        table.add_row(str(n), f"{s_rate:.2f}", f"{d_rate:.2f}", f"{s_rate / d_rate:.2f}")
    console.print(table)
    console.print(f"load average (1 min): {load_before:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    typer.run(main)
