"""Embedded Apache Kafka from Maven Central jars, on 127.0.0.1: one KRaft node or a cluster.

Each node is a broker and a controller (combined mode); with `infra.brokers` = N the
N nodes form the controller quorum (static voters), are formatted with one cluster id,
and keep their own ports, data directory, log and pid file. Up to 3 replicas of every
topic, internal ones included, with min.insync.replicas = replicas - 1 (capped at 2):
an acknowledged write (acks=all) survives the loss of any one node.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import shutil
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient

from infra.procs import InfraError, ManagedProcess, port_is_listening, require_tool
from webgym_common.config import InfraSettings
from webgym_common.topics import min_insync_replicas

HERE = Path(__file__).resolve().parent / "kafka"
LOCKS = Path(__file__).resolve().parent / "locks"


def lib_dir(infra: InfraSettings) -> Path:
    return infra.cache_dir / "kafka" / infra.kafka_version / "lib"


def jar_pins(kafka_version: str, locks: Path = LOCKS) -> dict[str, str]:
    """{jar file name: sha256} from infra/locks/kafka-<version>.sha256 (sha256sum's format)."""
    path = locks / f"kafka-{kafka_version}.sha256"
    if not path.exists():
        raise InfraError(f"no pinned jar hashes for Kafka {kafka_version} ({path} is missing): "
                         "pin a reviewed fetch with sha256sum, as that file's header says")
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split(maxsplit=1)
            pins[name.lstrip("*")] = digest
    return pins


def jar_mismatches(lib: Path, pins: Mapping[str, str]) -> list[str]:
    """What differs between the jars in `lib` and their pins: a jar not pinned, a pinned jar
    missing, or one whose sha256 differs (Maven checks only the repository's own checksums,
    which whoever serves the jar also serves)."""
    found = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in lib.glob("*.jar")}
    problems = [f"{name}: not pinned" for name in sorted(set(found) - set(pins))]
    problems += [f"{name}: missing" for name in sorted(set(pins) - set(found))]
    problems += [f"{name}: sha256 {found[name]} is not the pinned {pins[name]}"
                 for name in sorted(set(found) & set(pins)) if found[name] != pins[name]]
    return problems


def fetch_jars(infra: InfraSettings) -> Path:
    """Copy the broker and its dependencies from Maven Central into the cache, once, and
    keep them only if every jar matches its pinned sha256."""
    lib = lib_dir(infra)
    done = lib / ".complete"
    if done.exists():
        return lib
    pins = jar_pins(infra.kafka_version)
    mvn = require_tool("mvn", "apt-get install -y maven (needs Java 17: openjdk-17-jre-headless)")
    lib.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            mvn, "-q", "-B", "-f", str(HERE / "pom.xml"), "dependency:copy-dependencies",
            f"-DoutputDirectory={lib}", "-DincludeScope=runtime",
            f"-Dkafka.version={infra.kafka_version}",
        ],
        capture_output=True, text=True, timeout=1800,
    )
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise InfraError(f"could not fetch Kafka {infra.kafka_version} jars: {' | '.join(tail)}")
    if not any(lib.glob(f"kafka_2.13-{infra.kafka_version}.jar")):
        raise InfraError(f"Maven finished but kafka_2.13-{infra.kafka_version}.jar is missing")
    problems = jar_mismatches(lib, pins)
    if problems:
        shutil.rmtree(lib)  # never leave jars that failed their check where a start finds them
        raise InfraError(f"Kafka {infra.kafka_version}'s jars differ from "
                         f"infra/locks/kafka-{infra.kafka_version}.sha256: "
                         + "; ".join(problems[:5]))
    done.touch()
    return lib


@dataclass(frozen=True)
class Node:
    """One Kafka process: a broker and a KRaft controller (combined mode)."""

    node_id: int
    name: str  # its process name: "kafka" alone, "kafka-<id>" in a cluster
    port: int
    controller_port: int


def nodes(infra: InfraSettings, brokers: int | None = None) -> list[Node]:
    """The embedded stack's Kafka nodes (`brokers` of them: default the settings')."""
    if brokers is not None and brokers != infra.brokers:
        infra = infra.model_copy(update={"brokers": brokers})
    pairs = infra.kafka_node_ports()
    return [
        Node(k, "kafka" if len(pairs) == 1 else f"kafka-{k}", port, ctl)
        for k, (port, ctl) in enumerate(pairs, start=1)
    ]


def node_dir(infra: InfraSettings, node: Node) -> Path:
    return infra.data_dir / node.name


def heap(infra: InfraSettings) -> str:
    return infra.kafka_heap if infra.brokers == 1 else infra.kafka_cluster_heap


def server_properties(infra: InfraSettings, node: Node, cluster: list[Node], log_dirs: Path) -> str:
    """One node's configuration; every node of `cluster` is a voter of the controller quorum."""
    host = infra.host
    rf = min(len(cluster), 3)
    isr = min_insync_replicas(rf)
    voters = ",".join(f"{n.node_id}@{host}:{n.controller_port}" for n in cluster)
    return "\n".join([
        "process.roles=broker,controller",
        f"node.id={node.node_id}",
        f"controller.quorum.voters={voters}",
        f"listeners=PLAINTEXT://{host}:{node.port},CONTROLLER://{host}:{node.controller_port}",
        f"advertised.listeners=PLAINTEXT://{host}:{node.port}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={log_dirs}",
        # Up to 3 replicas of everything, and acks=all needs all but one of them: one
        # broker may die without losing an acknowledged write or stopping the writers.
        f"default.replication.factor={rf}",
        f"min.insync.replicas={isr}",
        f"offsets.topic.replication.factor={rf}",
        "offsets.topic.num.partitions=8",
        f"transaction.state.log.replication.factor={rf}",
        f"transaction.state.log.min.isr={isr}",
        f"share.coordinator.state.topic.replication.factor={rf}",
        # A replica that lost data must never become leader.
        "unclean.leader.election.enable=false",
        # A dead node is fenced (its partitions move) after 6 s instead of 9.
        "broker.heartbeat.interval.ms=1000",
        "broker.session.timeout.ms=6000",
        # Consumers join at once instead of waiting 3 s for more members.
        "group.initial.rebalance.delay.ms=0",
        # Topics come from the registry (`webgym topics create`), never by accident.
        "auto.create.topics.enable=false",
        "log.cleaner.backoff.ms=5000",
        "message.max.bytes=8388608",
        "",
    ])


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def formatted_cluster_id(meta_properties: str) -> str | None:
    """The cluster.id in a formatted node's meta.properties."""
    for line in meta_properties.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "cluster.id":
            return value.strip()
    return None


def cluster_id(infra: InfraSettings, cluster: list[Node]) -> str:
    """The id some node of the cluster was formatted with, or a new one: all must share it."""
    for n in cluster:
        meta = node_dir(infra, n) / "log" / "meta.properties"
        if meta.exists() and (found := formatted_cluster_id(meta.read_text())):
            return found
    return new_cluster_id()


def java_cmd(infra: InfraSettings, main: str, *args: str) -> list[str]:
    java = require_tool("java", "apt-get install -y openjdk-17-jre-headless")
    mem = heap(infra)
    return [
        java, f"-Xmx{mem}", f"-Xms{mem}", "-XX:+UseG1GC",
        "-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{HERE / 'log4j.properties'}",
        "-cp", f"{lib_dir(infra)}/*", main, *args,
    ]


def start(infra: InfraSettings, node: Node, proc: ManagedProcess) -> None:
    """Format the node's storage the first time (with the cluster's id), then start it."""
    fetch_jars(infra)
    cluster = nodes(infra)
    kafka_dir = node_dir(infra, node)
    log_dirs = kafka_dir / "log"
    config = kafka_dir / "server.properties"
    kafka_dir.mkdir(parents=True, exist_ok=True)
    config.write_text(server_properties(infra, node, cluster, log_dirs))
    if not (log_dirs / "meta.properties").exists():
        fmt = subprocess.run(
            # `=`: a base64 id may start with "-", which argparse would take for an option.
            java_cmd(infra, "kafka.tools.StorageTool", "format",
                     f"--cluster-id={cluster_id(infra, cluster)}", f"--config={config}"),
            capture_output=True, text=True, timeout=120,
        )
        if fmt.returncode != 0:
            raise InfraError(f"formatting Kafka storage failed: {fmt.stdout}{fmt.stderr}".strip())
    proc.start(java_cmd(infra, "kafka.Kafka", str(config)))


def layout_file(infra: InfraSettings) -> Path:
    return infra.data_dir / "run" / "kafka.brokers"


def record_layout(infra: InfraSettings) -> None:
    """Remember how many nodes `up` started, so `status` and `down` find them all."""
    layout_file(infra).parent.mkdir(parents=True, exist_ok=True)
    layout_file(infra).write_text(f"{infra.brokers}\n")


def recorded_brokers(infra: InfraSettings) -> int | None:
    try:
        return int(layout_file(infra).read_text().strip())
    except (OSError, ValueError):
        return None


async def healthy(bootstrap: str, timeout_s: float = 5.0, node_id: int | None = None) -> bool:
    """The broker answers a metadata request, has a controller and (given) lists `node_id`."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    if not port_is_listening(host, int(port)):
        return False  # checked first so a stopped broker does not flood the log
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await asyncio.wait_for(admin.start(), timeout_s)
        cluster = await asyncio.wait_for(admin.describe_cluster(), timeout_s)
        listed = {b.get("node_id") for b in cluster.get("brokers", [])}
        return cluster.get("controller_id", -1) >= 0 and (node_id is None or node_id in listed)
    except Exception:
        return False
    finally:
        try:
            await asyncio.wait_for(admin.close(), timeout_s)
        except Exception:
            pass
