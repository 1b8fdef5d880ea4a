"""The pipeline's processes on a Ray cluster: `webgym cluster up | status | down`.

Delivery semantics: none of its own, as under the single-machine supervisor
(infra/supervisor.py). Each process runs under a named, detached Ray actor
(infra/cluster_actor.py) that dies when its process exits; Ray restarts the actor
(`max_restarts=-1`: always; on its node, or on another node with the resource when that node
is gone) and the new actor starts the process again. The process's own recovery (committed
offsets, changelogs, the evaluator's transactions) makes a restart lose nothing and score
nothing twice. Kafka and MinIO stay the data plane, at the settings' addresses: no event and
no blob travels through Ray.

`up --address HOST:PORT` joins a cluster started with `ray start --head` (and `ray start
--address` on the other nodes) and makes the actors in namespace "webgym" match the
processes `webgym pipeline up` runs for the same settings (infra.pipeline.selected): one
actor `webgym-<process>-<i>` each, `--browsers N` of the browser (a scalable row) up to the
partition count of the widest topic it reads and no further (a member beyond it would own
no partition). An actor needs one unit of its row's custom resource (ProcessSpec.resource:
browser, inference, trainer or stream) and no CPU, so the nodes' `--resources` decide where
each process runs. Actors already there are kept; those no longer wanted are stopped. `up`
waits until every process is ready (its ready file, webgym_common.lifecycle.mark_ready).

`status` reads the actors' state, node and restarts from the GCS's actor table
(`ray._private.state.actors`, what `ray.state.actors()` returns): the state API
(ray.util.state) asks the dashboard, which the minimal `ray` package the project pins and a
`ray start --include-dashboard=false` cluster lack. The process's pid and readiness come from
the actor itself. `down` asks each actor to stop its process group, then kills the actor
without a restart.

Ray reports usage to its vendor unless RAY_USAGE_STATS_ENABLED=0: this process sets it
before it connects, every process an actor starts has it (webgym_common.telemetry), and
docs/scale-out.md starts `ray start` with it. The default address is loopback, 127.0.0.2:6379
(Ray turns 127.0.0.1 into the machine's own address; docs/scale-out.md starts one machine's
nodes on 127.0.0.2 and 127.0.0.3); Ray's own servers listen on every interface whatever the
node's address.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from infra import pipeline
from infra.cluster_actor import Launch, ProcessActor
from infra.procs import InfraError, port_is_listening
from webgym_common.config import Settings, settings_env
from webgym_common.processes import PROCESSES as SPECS
from webgym_common.processes import ClusterResource, Process, ProcessSpec
from webgym_common.telemetry import without_telemetry
from webgym_common.topics import topic_specs

NAMESPACE = "webgym"
PREFIX = "webgym-"
CALL_TIMEOUT_S = 10.0  # an actor's answer to info() or log_tail()


@dataclass(frozen=True)
class Placement:
    """One actor `up` wants: which process, its index, the resource it needs."""

    process: str
    index: int
    resource: ClusterResource

    @property
    def actor(self) -> str:
        return actor_name(self.process, self.index)


@dataclass(frozen=True)
class ActorRow:
    """One line of `cluster status`."""

    process: str
    actor: str
    state: str  # Ray's: ALIVE, RESTARTING, PENDING_CREATION, DEPENDENCIES_UNREADY; "-": none
    node_id: str
    node_ip: str
    restarts: int
    pid: int | None = None  # the process's, on its node
    ready: bool = False


# -- the story ----------------------------------------------------------------------------


def up(settings: Settings, address: str, browsers: int = 1,
       timeout_s: float = 180.0) -> tuple[list[str], list[str]]:
    """Make the cluster's actors match `placements`; wait until every process is ready.
    (actors started, actors stopped). A process that is not ready in time, or whose actor
    restarted before it ever was, fails `up` with its log and stops every actor."""
    import ray

    connect(address)
    wanted = placements(settings, browsers)
    start, stop = plan([p.actor for p in wanted], live_actors())
    for name in stop:
        stop_actor(name)
    actor_class = ray.remote(ProcessActor)
    for p in wanted:
        if p.actor in start:
            actor_class.options(
                name=p.actor, namespace=NAMESPACE, lifetime="detached", max_restarts=-1,
                max_task_retries=0, num_cpus=0, resources={p.resource.value: 1},
            ).remote(launch(settings, p))
    wait_ready([p.actor for p in wanted], timeout_s)
    return start, stop


def status(address: str, settings: Settings) -> list[ActorRow]:
    """Every actor in the namespace, and each process `up` would run that has none."""
    connect(address)
    live = live_actors()
    rows = status_rows(live, actor_records(live), [p.actor for p in placements(settings)])
    return [with_process(r) for r in rows]


def down(address: str) -> list[str]:
    """Stop every actor's process, then kill the actor without a restart."""
    connect(address)
    names = live_actors()
    down_names(names)
    return names


# -- decisions ----------------------------------------------------------------------------


def actor_name(process: str, index: int) -> str:
    return f"{PREFIX}{process}-{index}"


def process_of(actor: str) -> str:
    """The process an actor name runs: "webgym-model-loader-0" -> "model-loader"."""
    return actor.removeprefix(PREFIX).rsplit("-", 1)[0]


def partition_cap(settings: Settings, spec: ProcessSpec) -> int:
    """How many members of a scalable process's group can each own a partition: the
    partition count of the widest topic it reads."""
    partitions = topic_specs(settings.kafka)
    return max(partitions[t].partitions for t in spec.reads)


def replicas(settings: Settings, spec: ProcessSpec, asked: int) -> int:
    """How many actors of a process `up` runs when `asked` for: one of an unscalable row,
    at most partition_cap of a scalable one."""
    if asked < 1:
        raise InfraError(f"{spec.name.value}: at least 1 actor, not {asked}")
    if asked > 1 and not spec.scalable:
        raise InfraError(f"{spec.name.value} does not scale out (one actor)")
    return min(asked, partition_cap(settings, spec)) if spec.scalable else 1


def placements(settings: Settings, browsers: int = 1) -> list[Placement]:
    """The actors `up` wants: those of the processes the supervisor would run
    (infra.pipeline.selected), `browsers` of the browser."""
    out = []
    for name in pipeline.selected(settings):
        spec = SPECS[Process(name)]
        n = replicas(settings, spec, browsers if spec.name is Process.BROWSER else 1)
        out += [Placement(name, i, spec.resource) for i in range(n)]
    return out


def plan(wanted: list[str], running: list[str]) -> tuple[list[str], list[str]]:
    """(actors to start, actors to stop): the wanted ones missing, the running ones unwanted."""
    return [n for n in wanted if n not in running], [n for n in running if n not in wanted]


def launch(settings: Settings, placement: Placement) -> Launch:
    """What the actor gets: the settings as the environment, the telemetry off."""
    infra = settings.infra
    return Launch(placement.process, placement.actor, without_telemetry(settings_env(settings)),
                  str(infra.data_dir), infra.stop_timeout_s, infra.restart_backoff_s)


def record_of(name: str, records: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The actor table's record of the actor named `name` now: a dead actor's record stays
    in the table under its name, so the one not DEAD, else the latest."""
    mine = [r for r in records if r.get("Name") == name]
    if not mine:
        return None
    return max(mine, key=lambda r: (r.get("State") != "DEAD", r.get("StartTime") or 0))


def restarts_of(record: Mapping[str, Any] | None) -> int:
    """How often Ray restarted the actor of an actor-table record (0: no record)."""
    return int((record or {}).get("NumRestarts") or 0)


def status_rows(live: list[str], records: Iterable[Mapping[str, Any]],
                expected: list[str]) -> list[ActorRow]:
    """One row per live actor (a name Ray lists in the namespace) and per expected actor
    with none, in the order of `expected`, then the others by name."""
    records = list(records)
    rows = []
    for name in [*expected, *sorted(set(live) - set(expected))]:
        record = record_of(name, records) if name in live else None
        if record is None:
            rows.append(ActorRow(process_of(name), name, "-", "-", "-", 0))
            continue
        address = record.get("Address") or {}
        rows.append(ActorRow(process_of(name), name, str(record.get("State", "?")),
                             str(address.get("NodeID") or "-"),
                             str(address.get("IPAddress") or "-"), restarts_of(record)))
    return rows


def resource_table() -> str:
    """The docs' table of each process's resource (docs/scale-out.md), from the registry."""
    rows = ["| process | resource | actors |", "|---|---|---|"]
    for spec in SPECS.values():
        actors = "`--browsers N`, up to the partitions" if spec.name is Process.BROWSER \
            else "1"
        when = " (training)" if spec.training else " (opt-in)" if spec.optional else ""
        rows.append(f"| `{spec.name.value}`{when} | `{spec.resource.value}` | {actors} |")
    return "\n".join(rows)


def not_ready(infos: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """The actors whose process is not (yet) ready: no answer, or not ready."""
    return [name for name, info in infos.items() if not (info and info.get("ready"))]


# -- Ray ----------------------------------------------------------------------------------


def connect(address: str) -> None:
    """Join the cluster at `address` as a driver in the namespace, usage stats off."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    if ray.is_initialized():
        return
    host, _, port = address.rpartition(":")
    if not (port.isdigit() and port_is_listening(host, int(port), timeout_s=3.0)):
        # ray.init would retry for ever
        raise InfraError(f"no Ray cluster at {address}: start one with `ray start --head` "
                         "(docs/scale-out.md)")
    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False,
                 logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError) as e:
        raise InfraError(f"no Ray cluster at {address} ({e}): start one with "
                         "`ray start --head` (docs/scale-out.md)") from e


def live_actors() -> list[str]:
    """The names of our actors that are not dead, in the namespace."""
    import ray

    return sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                  if a["namespace"] == NAMESPACE and a["name"].startswith(PREFIX))


def actor_records(names: list[str]) -> list[dict[str, Any]]:
    """The GCS actor table's records of these names (all states: a name's record may be
    that of a dead predecessor; record_of picks)."""
    from ray._private import state

    table = state.actors()
    return [r for r in table.values() if r.get("Name") in names]


def handle(name: str) -> Any:
    import ray

    return ray.get_actor(name, namespace=NAMESPACE)


def ask(name: str, method: str, timeout_s: float = CALL_TIMEOUT_S) -> Any:
    """An actor method's answer, or None if the actor does not answer in time."""
    import ray

    try:
        return ray.get(getattr(handle(name), method).remote(), timeout=timeout_s)
    except (ray.exceptions.RayError, ValueError):
        return None


def with_process(row: ActorRow) -> ActorRow:
    """The row with its process's pid and readiness, as its actor tells them."""
    info = ask(row.actor, "info") if row.state == "ALIVE" else None
    if not info:
        return row
    return ActorRow(**{**row.__dict__, "pid": info["pid"] if info["alive"] else None,
                       "ready": bool(info["ready"])})


def wait_ready(names: list[str], timeout_s: float) -> None:
    records = actor_records(names)
    restarts = {n: restarts_of(record_of(n, records)) for n in names}
    deadline = time.monotonic() + timeout_s
    while waiting := not_ready({n: ask(n, "info") for n in names}):
        records = actor_records(names)
        crashed = [n for n in waiting if restarts_of(record_of(n, records)) > restarts[n]]
        if crashed or time.monotonic() > deadline:
            why = "exited before it was ready" if crashed else f"not ready in {timeout_s:.0f} s"
            name = (crashed or waiting)[0]
            tail = ask(name, "log_tail") or ""
            down_names(names)
            raise InfraError(f"{name}: its process {why}; every actor stopped\n{tail}")
        time.sleep(1.0)


def stop_actor(name: str) -> None:
    """Stop its process group (it SIGTERMs, then SIGKILLs), then kill it: no restart."""
    import ray

    try:
        actor = handle(name)
    except ValueError:  # gone already
        return
    ask(name, "stop", timeout_s=120.0)
    ray.kill(actor, no_restart=True)


def down_names(names: list[str]) -> None:
    for name in names:
        stop_actor(name)
