"""Hosts that fail, on this machine: the pipeline on a Ray cluster of network-namespace hosts
(harness.hosts) loses, duplicates and miscounts no episode through three faults.

Host A runs the embedded Kafka, MinIO and sandbox web, bound to A's address (198.18.0.1), and
the Ray head, which offers the stream, inference and trainer resources: the policy (the
scripted teacher: the CPU here cannot hold vLLM replicas beside the browsers), evaluator,
history, metrics and replay actors run there. Hosts B and C run Ray nodes offering 2 browsers
each; `webgym cluster up --browsers 2` places both browser actors on B (C joins after). The
browsers reach the sandbox at A's private address because the browser's private allowlist
exempts the sandbox ("{sandbox}", its default). With one iteration of 48 episodes in flight:

- (a) host B loses its power: every process inside it (the raylet, the actors' workers, the
  browser workers and their Chromium) is SIGKILLed; Ray restarts the browser actors on C;
- (b) C's link is cut for 30 s while its episodes run, then restored;
- (c) host D joins with a Ray node offering 4 browsers, and `webgym cluster up --browsers 8`
  grows the browsers to the browser topic's partition count (4), no further.

Two poison records written to webgym.episodes before the iteration are the only real poison.
The verdict is counted from the topics (tests/chaos/observe.py, harness.outcomes.tally):
0 lost, 0 duplicated, 0 wrong, no dead letter but those of the poison, each of which has one.

Nothing outside 198.18.0.0/24 is addressed: every process runs inside a host, and the test's
own clients (its producer, its reads of the topics) run on a thread inside host A
(harness.hosts.run_inside). The hosts are removed, with every process inside them, when the
test ends however it ends. Skipped where namespaces cannot be made (not root, no iproute2).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.hosts import Host, Hosts, run_inside, unavailable
from harness.outcomes import Tally, tally
from harness.sandbox_tasks import short_train_tasks
from harness.topic_reads import read_events
from infra.cluster import partition_cap
from producers.catalog import load_tasks
from producers.controller.rollout import IterationState, run_iteration
from tests.chaos import bad_input
from tests.chaos.observe import observe, sandbox_posts
from tests.chaos.scenario import Options
from tests.support.pipeline_cli import cluster_rows, webgym
from webgym_common.choices import SamplingStrategy
from webgym_common.config import InfraSettings, Settings, load_settings
from webgym_common.processes import PROCESSES, Process
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(2700),
              pytest.mark.skipif(unavailable() is not None, reason=f"namespace hosts: "
                                 f"{unavailable()}")]
EPISODES = 48
CUT_S = 30.0
RAY_PORT = 6379  # every host has its own ports: Ray's defaults clash with nothing
HEAD_RESOURCES = '{"stream": 8, "inference": 2, "trainer": 1}'
# The GCS declares a node dead after this many failed health checks in a row (Ray's default:
# 5, every 3 s, each waiting up to 10 s). With the default a 30 s cut killed C: the checks
# still failed for ~25 s after the link came back, the GCS marked C dead, and C's raylet,
# told so, exited. 12 rides out the cut and still finds a node whose raylet is gone (its
# port refuses at once) in ~36 s. docs/scale-out.md starts the head the same way.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_health_check_failure_threshold": "12"}


def hosts_settings(data_dir: Path, a: Host) -> Settings:
    """The stack bound to A's address, credentials chosen (a non-loopback host requires
    them: infra.exposure), a fresh prefix; quick timeouts so faults show within a minute."""
    return load_settings(
        infra={"home": InfraSettings().home, "data_dir": str(data_dir), "host": a.address,
               "restart_backoff_s": 0.5},
        kafka={"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "partitions": 4,
               "topic_prefix": f"h{uuid.uuid4().hex[:10]}"},
        s3={"access_key": f"hosts{uuid.uuid4().hex[:8]}", "secret_key": uuid.uuid4().hex},
        browser={"contexts": 2, "settle_s": 0.2, "wait_action_s": 1.0,
                 "observe_timeout_s": 10.0, "action_timeout_s": 8.0,
                 "navigation_timeout_s": 10.0},
        policy={"kind": "teacher", "teacher_delay_s": 0.5},
        rollout={"completion_threshold": 1.0, "grace_period_s": 60.0, "cancel_wait_s": 60.0,
                 "score_wait_s": 180.0, "task_timeout_minutes": 10.0, "seed": 5,
                 "strategy": SamplingStrategy.UNIFORM},
    )


@dataclass
class Cluster:
    """The hosts, the settings and the Ray nodes started in them (a log each)."""

    hosts: Hosts
    settings: Settings
    logs: Path
    temp: str  # Ray's temp dir, shared by the nodes: short, Ray's sockets live in it
    nodes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def head(self) -> Host:
        return self.hosts.hosts["a"]

    @property
    def address(self) -> str:
        return f"{self.head.address}:{RAY_PORT}"

    def start_node(self, name: str, resources: str) -> float:
        """`ray start --block` inside host `name` (the head in A); seconds until it runs."""
        host = self.hosts.hosts[name]
        where = (["--head", f"--port={RAY_PORT}", "--include-dashboard=false"]
                 if host is self.head else [f"--address={self.address}"])
        log = self.logs / f"ray-{name}.log"
        started = time.monotonic()
        with log.open("wb") as out:
            self.nodes[name] = proc = subprocess.Popen(
                host.command([str(Path(sys.executable).parent / "ray"), "start", "--block",
                              "--num-cpus=1", "--object-store-memory=200000000",
                              f"--node-ip-address={host.address}", f"--temp-dir={self.temp}",
                              f"--resources={resources}", *where]),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **RAY_ENV}, start_new_session=True)
        while "will now block" not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() - started < 120, log.read_text()
            time.sleep(0.5)
        return time.monotonic() - started

    def cli(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        """`webgym ARGS` inside host A."""
        return webgym(self.settings, *args, timeout=timeout, inside=self.head)

    def status(self) -> dict[str, dict[str, str]]:
        return cluster_rows(self.cli("cluster", "status", "--address", self.address).stdout)

    def browsers(self) -> dict[str, dict[str, str]]:
        return {n: r for n, r in self.status().items() if r["process"] == "browser"}

    def tails(self) -> str:
        logs = [*self.logs.glob("ray-*.log"),
                *(self.settings.infra.data_dir / "logs").glob("*.log")]
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-1500:]
                         for p in sorted(logs))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Hosts A, B, C; the stack and the Ray head in A, Ray nodes in B and C. Torn down
    always: the actors and the stack asked to stop, then every host killed and removed."""
    temp = tempfile.mkdtemp(prefix="wgrh", dir="/tmp")
    with Hosts(f"wgh{os.getpid() % 100000}") as hosts:
        a = hosts.add("a")
        for name in ("b", "c"):
            hosts.add(name)
        c = Cluster(hosts, hosts_settings(tmp_path / "data", a), tmp_path, temp)
        try:
            up = c.cli("infra", "up", timeout=400)
            assert up.returncode == 0, up.stdout + up.stderr
            c.start_node("a", HEAD_RESOURCES)
            c.start_node("b", '{"browser": 2}')
            yield c
        finally:
            for name in hosts.hosts:  # a failure in the middle of a cut leaves it cut
                hosts.restore(name)
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.cli("cluster", "down", "--address", c.address, timeout=300)
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.cli("infra", "down", timeout=300)
            keep_ray_logs(Path(temp), tmp_path / "ray")
        # Hosts.close kills what is left inside each host (the Ray nodes) and removes them.
    shutil.rmtree(temp, ignore_errors=True)


def keep_ray_logs(temp: Path, to: Path) -> None:
    """The GCS's and the raylets' logs, out of Ray's temp dir before it goes."""
    to.mkdir(exist_ok=True)
    for log in temp.glob("session_*/logs/*"):
        if log.name.startswith(("gcs_server", "raylet")) and log.is_file():
            shutil.copy(log, to / log.name)


async def until(check: Callable[[], bool], timeout_s: float, what: str,
                every_s: float = 0.5) -> float:
    """Seconds until `check()` holds (a blocking check runs on a thread)."""
    started = time.monotonic()
    while not await asyncio.to_thread(check):
        assert time.monotonic() - started < timeout_s, f"{what}: not in {timeout_s:.0f} s"
        await asyncio.sleep(every_s)
    return time.monotonic() - started


def all_ready_on(rows: dict[str, dict[str, str]], addresses: set[str], count: int) -> bool:
    return len(rows) == count and all(
        r["state"] == "ALIVE" and r["ready"] == "yes" and r["node ip"] in addresses
        for r in rows.values())


@dataclass
class Run:
    """What the scenario measured, for the assertions and the printed line."""

    healed: dict[str, float] = field(default_factory=dict)  # fault -> seconds to heal
    moments: dict[str, int] = field(default_factory=dict)  # fault -> episodes done then
    browsers: dict[str, dict[str, str]] = field(default_factory=dict)  # after (c)
    grow_out: str = ""
    closed: tuple[int, int] = (0, 0)  # the iteration's episodes requested, completed
    verdict: Tally | None = None
    poison: bad_input.Fate | None = None


async def scenario(c: Cluster, tasks_file: Path) -> Run:
    """The three faults over one iteration, then the count. Runs inside host A."""
    s, hosts, run = c.settings, c.hosts, Run()
    host_c = hosts.hosts["c"]
    done = 0

    def progress(state: IterationState) -> None:
        nonlocal done
        done = len(state.completed)

    async def reached(n: int) -> None:
        await until(lambda: done >= n or iteration.done(), 900, f"{n} episodes completed")
        if done < n:
            iteration.result()  # the iteration's own error, if it ended with one
            raise AssertionError(f"the iteration ended with {done} episodes, not {n}")

    posts_before = await sandbox_posts(s) or ({}, {})
    poison = await bad_input.inject(s, [Topic.EPISODES], per_topic=2, seed=3)
    async with EventProducer(s, client_id="test") as producer:
        assert not (await load_tasks(tasks_file, producer)).bad
        iteration = asyncio.create_task(run_iteration(s, producer, 0, "train", EPISODES,
                                                      on_update=progress))
        # (a) B loses its power; its two browser actors come back on C.
        await reached(4)
        run.moments["a"] = done
        assert hosts.kill("b")
        run.healed["a"] = await until(
            lambda: all_ready_on(c.browsers(), {host_c.address}, 2), 300,
            "the browsers back on C", every_s=2)
        # (b) C's cable pulled for 30 s while its episodes run.
        await reached(run.moments["a"] + 6)
        run.moments["b"] = done
        assert done < EPISODES
        hosts.cut("c")
        await asyncio.sleep(CUT_S)
        hosts.restore("c")
        t_restore = time.monotonic()
        at_restore = done
        await reached(at_restore + 1)
        run.healed["b: an episode done"] = time.monotonic() - t_restore
        await until(lambda: all_ready_on(c.browsers(), {host_c.address}, 2), 300,
                    "the browsers on C after the cut", every_s=2)
        run.healed["b"] = time.monotonic() - t_restore
        # (c) D joins; the browsers grow to the partitions and no further.
        run.moments["c"] = done
        hosts.add("d")
        t_join = time.monotonic()
        await asyncio.to_thread(c.start_node, "d", '{"browser": 4}')
        grow = await asyncio.to_thread(
            c.cli, "cluster", "up", "--address", c.address, "--browsers", "8",
            "--timeout", "300", timeout=420)
        assert grow.returncode == 0, grow.stdout + grow.stderr + c.tails()
        run.grow_out = grow.stdout
        run.browsers = await asyncio.to_thread(c.browsers)
        run.healed["c"] = time.monotonic() - t_join
        run.moments["c: grown"] = done
        async with asyncio.timeout(1200):
            _, closed = await iteration
        run.closed = (closed.requested, closed.completed)
    # Time for the history, the metrics and the dead letters to catch up with the last score.
    injected = set(poison.written)
    options = Options(tasks=tuple(t["task_id"] for t in short_train_tasks()))
    deadline = time.monotonic() + 90
    while True:
        run.verdict = tally("hosts", await observe(s, options, injected, posts_before))
        if run.verdict.clean or time.monotonic() > deadline:
            break
        await asyncio.sleep(5)
    letters = [(d.source_topic, d.source_partition, d.source_offset, d.error)
               for d in await read_events(s, Topic.DLQ, set()) if hasattr(d, "source_topic")]
    run.poison = bad_input.fate(poison, letters)
    return run


def test_the_pipeline_survives_a_dead_host_a_cut_link_and_a_new_host(
        cluster: Cluster, tmp_path: Path) -> None:
    c, s = cluster, cluster.settings
    started = time.monotonic()
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in short_train_tasks()))
    run_inside(c.head, lambda: asyncio.run(create_topics(s)))
    up = c.cli("cluster", "up", "--address", c.address, "--browsers", "2", "--timeout", "300",
               timeout=420)
    assert up.returncode == 0, up.stdout + up.stderr + c.tails()
    a, b, cc = (c.hosts.hosts[n] for n in "abc")
    before = c.status()
    assert all_ready_on({n: r for n, r in before.items() if r["process"] == "browser"},
                        {b.address}, 2), before
    assert {r["node ip"] for r in before.values() if r["process"] != "browser"} == {a.address}
    c.start_node("c", '{"browser": 2}')

    run = run_inside(c.head, lambda: asyncio.run(scenario(c, tasks_file)))
    verdict, cap = run.verdict, partition_cap(s, PROCESSES[Process.BROWSER])
    assert verdict is not None and run.poison is not None
    print(f"hosts: {verdict.episodes} episodes, lost {verdict.lost}, duplicated "
          f"{verdict.duplicated}, wrong {verdict.wrong}, dead letters of good events "
          f"{verdict.dlq}, {run.poison.describe()}; healed "
          + ", ".join(f"{k} {v:.0f} s" for k, v in run.healed.items())
          + f"; done at each fault {run.moments}; browsers after D joined "
          + ", ".join(f"{n}@{r['node ip']}" for n, r in sorted(run.browsers.items()))
          + f"; {time.monotonic() - started:.0f} s in all")
    assert run.closed == (EPISODES, EPISODES), (run.closed, c.tails())
    assert run.moments["c"] < EPISODES, run.moments  # D joined with episodes in flight
    assert (verdict.episodes, verdict.lost, verdict.duplicated, verdict.wrong, verdict.dlq) \
        == (EPISODES, 0, 0, 0, 0), verdict.notes
    assert not run.poison.unaccounted and sum(run.poison.dead_lettered.values()) == 2, \
        run.poison.describe()
    d = c.hosts.hosts["d"]
    assert cap == 4 and f"{cap} browser actors" in run.grow_out, run.grow_out
    assert all_ready_on(run.browsers, {cc.address, d.address}, cap), run.browsers
    assert d.address in {r["node ip"] for r in run.browsers.values()}, run.browsers
