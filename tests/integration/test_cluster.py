"""`webgym cluster up` on a real Ray cluster of two nodes: a browser process SIGKILLed
mid-iteration is restarted by Ray, every episode is scored exactly once, and `webgym
cluster down` leaves no actor and no worker process.

A Ray head (resources stream, inference, trainer) and a browser node, started with
`ray start --block` on loopback addresses and free ports, usage stats off, stopped by
their PIDs; the real embedded Kafka and MinIO; the teacher policy. Outcomes are counted
from the topics themselves (harness.topic_reads, harness.delivery_counts), never from the
project's metrics. Everything is driven through the CLI, as a user would.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.delivery_counts import episode_outcomes
from harness.sandbox_tasks import short_train_tasks
from harness.topic_reads import read_events
from infra.procs import free_port_block, pid_alive
from producers.catalog import load_tasks
from producers.controller.rollout import run_iteration
from tests.support.pipeline_cli import cluster_rows, row, webgym
from webgym_common.choices import SamplingStrategy
from webgym_common.config import Settings
from webgym_common.events import EpisodeCompleted, EpisodeRequested, EpisodeScored
from webgym_common.stream.bus import EventProducer
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session"),
              pytest.mark.timeout(1800)]
EPISODES = 16
HEAD, NODE = "127.0.0.2", "127.0.0.3"  # loopback: Ray turns 127.0.0.1 into eth0's address


def ray_ports(base: int) -> list[str]:
    """A node's ports, all from base .. base+59: none of Ray's defaults, shared with other
    clusters on this machine, is left to chance."""
    return [f"--node-manager-port={base}", f"--object-manager-port={base + 1}",
            f"--dashboard-agent-listen-port={base + 2}",
            f"--dashboard-agent-grpc-port={base + 3}", f"--metrics-export-port={base + 4}",
            f"--runtime-env-agent-port={base + 5}", f"--min-worker-port={base + 10}",
            f"--max-worker-port={base + 59}"]


def start_node(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """`ray start --block ARGS` in a session of its own (its group: every process it starts)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "ray"), "start", "--block", "--num-cpus=1",
             *args], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}, start_new_session=True)
    deadline = time.monotonic() + 120
    while "will now block" not in log.read_text(errors="replace"):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.5)
    return proc


def stop_node(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM by its PID (it stops what it started), then SIGKILL to its group's leftovers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(45)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # agents that outlive their raylet
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A head offering stream, inference and trainer, and a node offering 2 browsers."""
    logs = tmp_path_factory.mktemp("ray")
    temp = tempfile.mkdtemp(prefix="wgray", dir="/tmp")  # short: Ray's sockets live in it
    base = free_port_block(130)
    nodes = []
    try:
        nodes.append(start_node(
            ["--head", f"--node-ip-address={HEAD}", f"--port={base + 120}",
             "--include-dashboard=false", f"--temp-dir={temp}",
             '--resources={"stream": 8, "inference": 2, "trainer": 1}', *ray_ports(base)],
            logs / "head.log"))
        nodes.append(start_node(
            [f"--address={HEAD}:{base + 120}", f"--node-ip-address={NODE}",
             f"--temp-dir={temp}", '--resources={"browser": 2}', *ray_ports(base + 60)],
            logs / "node.log"))
        yield f"{HEAD}:{base + 120}"
    finally:
        for proc in reversed(nodes):  # the browser node first, while its head still answers
            stop_node(proc)
        shutil.rmtree(temp, ignore_errors=True)


def fast(settings: Settings) -> Settings:
    rollout_cfg = settings.rollout.model_copy(update={
        "completion_threshold": 1.0, "grace_period_s": 60.0, "cancel_wait_s": 60.0,
        "score_wait_s": 180.0, "task_timeout_minutes": 10.0, "seed": 5,
        "strategy": SamplingStrategy.UNIFORM})
    return settings.model_copy(update={"rollout": rollout_cfg})


def status(settings: Settings, address: str) -> dict[str, dict[str, str]]:
    """`webgym cluster status`, each actor's row by its column names."""
    return cluster_rows(webgym(settings, "cluster", "status", "--address", address).stdout)


def our_workers(settings: Settings) -> list[int]:
    """Every process whose environment holds this test's topic prefix (ours alone)."""
    mark = f"WEBGYM_KAFKA__TOPIC_PREFIX={settings.kafka.topic_prefix}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and mark in (proc / "environ").read_bytes().split(b"\0") \
                    and pid_alive(int(proc.name)):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def tails(settings: Settings) -> str:
    return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-1500:]
                     for p in sorted((settings.infra.data_dir / "logs").glob("cluster-*.log")))


async def test_ray_restarts_a_killed_browser_and_every_episode_is_scored_once(
    settings: Settings, ray_cluster: str, tmp_path: Path,
) -> None:
    s, address = fast(settings), ray_cluster
    started = time.monotonic()
    try:
        up = await asyncio.to_thread(
            webgym, s, "cluster", "up", "--address", address, "--policy", "teacher",
            "--contexts", "2", "--browsers", "2", "--timeout", "300", timeout=420)
        assert up.returncode == 0, up.stdout + up.stderr + tails(s)
        before = status(s, address)
        assert set(before) == {"webgym-browser-0", "webgym-browser-1", "webgym-policy-0",
                               "webgym-evaluator-0", "webgym-history-0", "webgym-metrics-0",
                               "webgym-replay-0"}, before
        assert all(r["state"] == "ALIVE" and r["ready"] == "yes" for r in before.values())
        assert {r["node ip"] for n, r in before.items() if "browser" in n} == {NODE}
        assert {r["node ip"] for n, r in before.items() if "browser" not in n} == {HEAD}
        victim = int(before["webgym-browser-0"]["pid"])

        tasks = short_train_tasks()
        (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
        async with EventProducer(s, client_id="test") as producer:
            assert not (await load_tasks(tmp_path / "tasks.jsonl", producer)).bad
            some_done = asyncio.Event()
            iteration = asyncio.create_task(run_iteration(
                s, producer, 0, "train", EPISODES,
                on_update=lambda st: some_done.set() if len(st.completed) >= 4 else None))
            async with asyncio.timeout(600):
                await some_done.wait()
            os.killpg(victim, signal.SIGKILL)  # the worker and its Chromium, mid-iteration
            killed_at = time.monotonic() - started
            async with asyncio.timeout(900):
                _, closed = await iteration

        requested = {e.episode_id: e.task.task_id for e in await read_events(
            s, Topic.EPISODES, set()) if isinstance(e, EpisodeRequested)}
        completed = [e for e in await read_events(s, Topic.EPISODES_COMPLETED, set())
                     if isinstance(e, EpisodeCompleted)]
        scored = [e for e in await read_events(s, Topic.EPISODES_SCORED, set())
                  if isinstance(e, EpisodeScored)]
        outcome = episode_outcomes(requested, completed, scored)
        deadline = time.monotonic() + 120
        while (after := status(s, address))["webgym-browser-0"]["ready"] != "yes":
            assert time.monotonic() < deadline, after
            await asyncio.sleep(2)
        workers = [int(r["pid"]) for r in after.values()]
        print(f"cluster: {len(requested)} episodes, {len(scored)} scores, lost "
              f"{outcome.lost}, duplicated {outcome.duplicated}, browser-0 restarts "
              f"{after['webgym-browser-0']['restarts']} (killed {killed_at:.0f} s after up "
              f"began), {time.monotonic() - started:.0f} s from up to the last score")
    finally:
        down = await asyncio.to_thread(webgym, s, "cluster", "down", "--address", address)
    assert closed.requested == EPISODES and closed.completed == EPISODES, (closed, tails(s))
    assert len(requested) == EPISODES
    assert (outcome.lost, outcome.duplicated) == (0, 0), outcome.notes
    assert sorted(e.episode_id for e in scored) == sorted(requested)  # each scored once
    restarted = after["webgym-browser-0"]
    assert int(restarted["restarts"]) >= 1 and restarted["state"] == "ALIVE"
    assert not pid_alive(victim) and int(restarted["pid"]) != victim
    assert all(int(r["restarts"]) == 0 for n, r in after.items() if n != "webgym-browser-0")

    assert down.returncode == 0, down.stdout + down.stderr
    assert "webgym-browser-0" in down.stdout
    left = webgym(s, "cluster", "status", "--address", address)
    assert left.returncode == 1 and "ALIVE" not in left.stdout, left.stdout
    assert "no actor" in row(left.stdout, "webgym-browser-0")
    assert not [p for p in workers if pid_alive(p)] and our_workers(s) == []
