"""infra/cluster.py's decisions (which actors for which settings, each row's resource, the cap
at the partition count, the status rows from the actor table) and infra/cluster_actor.py's
process handling without Ray: the actor dies with its process, its process dies with the
actor, and stop() leaves nothing of the group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra import cluster, cluster_actor, pipeline
from infra.cluster import ActorRow, Placement
from infra.cluster_actor import Launch, ProcessActor
from infra.procs import InfraError, pid_alive
from webgym_common.choices import PolicyKind
from webgym_common.config import PROJECT_ROOT, Settings, load_settings
from webgym_common.processes import PROCESSES, ClusterResource, Process

B, INF, T, S = (ClusterResource.BROWSER, ClusterResource.INFERENCE, ClusterResource.TRAINER,
              ClusterResource.STREAM)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(infra={"home": tmp_path, "data_dir": tmp_path / "data",
                                "stop_timeout_s": 5, "restart_backoff_s": 0.1},
                         kafka={"partitions": 4})


def with_(settings: Settings, section: str, **fields: object) -> Settings:
    return settings.model_copy(update={section: getattr(settings, section).model_copy(
        update=fields)})


def test_each_row_names_the_resource_its_actor_needs() -> None:
    assert {p: s.resource for p, s in PROCESSES.items()} == {
        Process.BROWSER: B, Process.POLICY: INF, Process.EVALUATOR: S, Process.HISTORY: S,
        Process.METRICS: S, Process.REPLAY: S, Process.TRAINER: T, Process.MODEL_LOADER: INF,
        Process.ENVSERVER: S}


def test_the_actors_are_the_processes_the_supervisor_runs(settings: Settings) -> None:
    wanted = cluster.placements(settings)
    assert [p.process for p in wanted] == pipeline.selected(settings)
    assert Placement("browser", 0, B) in wanted and Placement("policy", 0, INF) in wanted
    assert [p.actor for p in wanted][:2] == ["webgym-browser-0", "webgym-policy-0"]
    assert not {"trainer", "model-loader", "envserver"} & {p.process for p in wanted}


def test_training_and_an_opt_in_add_their_actors(settings: Settings) -> None:
    trains = with_(with_(settings, "rollout", train=True), "envserver", supervised=True)
    added = set(cluster.placements(trains)) - set(cluster.placements(settings))
    assert added == {Placement("trainer", 0, T), Placement("model-loader", 0, INF),
                     Placement("envserver", 0, S)}


def test_browsers_scale_up_to_the_partition_count_and_no_further(settings: Settings) -> None:
    browser = PROCESSES[Process.BROWSER]
    assert cluster.partition_cap(settings, browser) == 4  # the episode topics' partitions
    for asked, placed in ((1, 1), (3, 3), (4, 4), (9, 4)):
        actors = [p.actor for p in cluster.placements(settings, browsers=asked)
                  if p.process == "browser"]
        assert actors == [f"webgym-browser-{i}" for i in range(placed)]
    assert cluster.replicas(with_(settings, "kafka", partitions=16), browser, 9) == 9
    with pytest.raises(InfraError, match="at least 1"):
        cluster.placements(settings, browsers=0)


def test_only_a_scalable_row_gets_more_than_one_actor(settings: Settings) -> None:
    with pytest.raises(InfraError, match="metrics does not scale out"):
        cluster.replicas(settings, PROCESSES[Process.METRICS], 2)
    assert cluster.replicas(settings, PROCESSES[Process.METRICS], 1) == 1


def test_up_starts_the_missing_and_stops_the_unwanted() -> None:
    wanted = ["webgym-browser-0", "webgym-policy-0"]
    assert cluster.plan(wanted, []) == (wanted, [])
    assert cluster.plan(wanted, ["webgym-browser-0", "webgym-browser-1"]) == (
        ["webgym-policy-0"], ["webgym-browser-1"])
    assert cluster.plan(wanted, wanted) == ([], [])


def test_names_and_processes() -> None:
    assert cluster.actor_name("model-loader", 2) == "webgym-model-loader-2"
    assert cluster.process_of("webgym-model-loader-2") == "model-loader"
    assert cluster.process_of("webgym-browser-0") == "browser"


def test_the_launch_carries_the_settings_with_usage_stats_off(settings: Settings) -> None:
    teacher = with_(settings, "policy", kind=PolicyKind.TEACHER)
    launch = cluster.launch(teacher, Placement("policy", 0, INF))
    assert launch.env["RAY_USAGE_STATS_ENABLED"] == "0"
    assert launch.env["WEBGYM_POLICY__KIND"] == "teacher"
    assert launch.env["WEBGYM_KAFKA__BOOTSTRAP_SERVERS"] == settings.kafka.bootstrap_servers
    assert (launch.process, launch.actor, launch.data_dir) == (
        "policy", "webgym-policy-0", str(settings.infra.data_dir))
    assert cluster_actor.worker_command("policy")[1:] == ["-m", "webgym_cli", "-v", "worker",
                                                          "policy"]


def record(name: str, state: str, restarts: int = 0, start: int = 1,
           node: str = "n1", ip: str = "127.0.0.2") -> dict:
    return {"Name": name, "State": state, "NumRestarts": restarts, "StartTime": start,
            "Address": {"NodeID": node, "IPAddress": ip, "Port": 1}}


def test_status_rows_from_the_actor_table() -> None:
    records = [
        record("webgym-browser-0", "DEAD", restarts=3, start=1),  # before the last `down`
        record("webgym-browser-0", "ALIVE", restarts=1, start=2, node="n2", ip="127.0.0.3"),
        record("webgym-browser-1", "RESTARTING", restarts=2),
        record("webgym-policy-0", "DEAD", restarts=0),  # killed by `down`, not live
    ]
    live = ["webgym-browser-0", "webgym-browser-1"]
    rows = cluster.status_rows(live, records, ["webgym-browser-0", "webgym-policy-0"])
    assert rows == [
        ActorRow("browser", "webgym-browser-0", "ALIVE", "n2", "127.0.0.3", 1),
        ActorRow("policy", "webgym-policy-0", "-", "-", "-", 0),
        ActorRow("browser", "webgym-browser-1", "RESTARTING", "n1", "127.0.0.2", 2),
    ]


def test_a_process_is_ready_once_its_actor_says_so() -> None:
    assert cluster.not_ready({"a": {"ready": True}, "b": {"ready": False}, "c": None}) == [
        "b", "c"]


def test_the_docs_show_the_resources_of_the_registry() -> None:
    assert cluster.resource_table() in (PROJECT_ROOT / "docs" / "scale-out.md").read_text()


# -- the actor's process, without Ray ------------------------------------------------------

# Stands in for a worker: a child in its group (Chromium), its ready file, then it serves.
FAKE_WORKER = ("import os, pathlib, subprocess, sys, time; "
               "c = subprocess.Popen(['sleep', '60']); print(c.pid, flush=True); "
               "pathlib.Path(os.environ['WEBGYM_READY_FILE']).write_text('ready'); time.sleep(60)")

# An actor in a process of its own (its os._exit would end pytest): prints the process's pid.
ACTOR = f"""
import sys, time
from infra import cluster_actor
cluster_actor.worker_command = lambda process: [sys.executable, "-c", {FAKE_WORKER!r}]
cluster_actor.was_restarted = lambda: False
launch = cluster_actor.Launch("history", "webgym-history-0", {{}}, sys.argv[1], 5.0, 0.1)
actor = cluster_actor.ProcessActor(launch)
print(actor.popen.pid, flush=True)
time.sleep(60)
"""


def start_actor(tmp_path: Path) -> tuple[subprocess.Popen[str], int, int]:
    """(the actor's process, its worker's pid, the worker's child's pid)"""
    proc = subprocess.Popen([sys.executable, "-c", ACTOR, str(tmp_path)], text=True,
                            stdout=subprocess.PIPE, cwd=PROJECT_ROOT)
    assert proc.stdout is not None
    worker = int(proc.stdout.readline())
    log = tmp_path / "logs" / "cluster-webgym-history-0.log"
    deadline = time.monotonic() + 20
    while not log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc, worker, int(log.read_text().split()[0])


def gone(*pids: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(pid_alive(p) for p in pids)


def test_the_actor_dies_when_its_process_does_and_takes_its_group(tmp_path: Path) -> None:
    proc, worker, child = start_actor(tmp_path)
    try:
        os.kill(worker, signal.SIGKILL)  # the worker alone: its child is left in the group
        assert proc.wait(20) == 1  # os._exit(1): a death Ray restarts
        assert gone(child)
    finally:
        proc.kill()


def test_the_process_dies_when_the_actor_does(tmp_path: Path) -> None:
    proc, worker, child = start_actor(tmp_path)
    try:
        proc.kill()  # as ray.kill or a crash does: no handler runs
        assert gone(worker)  # its parent-death signal
    finally:
        os.killpg(worker, signal.SIGKILL) if pid_alive(worker) else None
        os.kill(child, signal.SIGKILL) if pid_alive(child) else None


def test_stop_ends_the_process_group_and_no_restart_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cluster_actor, "worker_command",
                        lambda process: [sys.executable, "-c", FAKE_WORKER])
    monkeypatch.setattr(cluster_actor, "was_restarted", lambda: False)
    monkeypatch.setattr(cluster_actor, "node_id", lambda: "n1")
    actor = ProcessActor(Launch("history", "webgym-history-0", {}, str(tmp_path), 5.0, 0.1))
    deadline = time.monotonic() + 20
    while not actor.info()["ready"] and time.monotonic() < deadline:
        time.sleep(0.1)
    info = actor.info()
    assert info["ready"] and info["alive"] and info["node_id"] == "n1"
    child = int(Path(info["log"]).read_text().split()[0])
    assert actor.stop()
    assert gone(info["pid"], child)
    assert not actor.info()["ready"] and not actor.files.pid_file.exists()
