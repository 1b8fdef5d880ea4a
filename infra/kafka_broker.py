"""Embedded Apache Kafka: a KRaft single node from Maven Central jars, on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import uuid
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient

from infra.procs import InfraError, ManagedProcess, port_is_listening, require_tool
from webgym_common.config import InfraSettings

HERE = Path(__file__).resolve().parent / "kafka"


def lib_dir(infra: InfraSettings) -> Path:
    return infra.cache_dir / "kafka" / infra.kafka_version / "lib"


def fetch_jars(infra: InfraSettings) -> Path:
    """Copy the broker and its dependencies from Maven Central into the cache, once."""
    lib = lib_dir(infra)
    done = lib / ".complete"
    if done.exists():
        return lib
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
    done.touch()
    return lib


def server_properties(infra: InfraSettings, log_dirs: Path) -> str:
    host, port, ctl = infra.host, infra.kafka_port, infra.kafka_controller_port
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@{host}:{ctl}",
        f"listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{ctl}",
        f"advertised.listeners=PLAINTEXT://{host}:{port}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={log_dirs}",
        # One node: internal topics cannot have more than one replica.
        "offsets.topic.replication.factor=1",
        "offsets.topic.num.partitions=8",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        # Consumers join at once instead of waiting 3 s for more members.
        "group.initial.rebalance.delay.ms=0",
        # Topics come from the registry (`webgym topics create`), never by accident.
        "auto.create.topics.enable=false",
        "log.cleaner.backoff.ms=5000",
        "message.max.bytes=8388608",
        "",
    ])


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def java_cmd(infra: InfraSettings, main: str, *args: str) -> list[str]:
    java = require_tool("java", "apt-get install -y openjdk-17-jre-headless")
    return [
        java, f"-Xmx{infra.kafka_heap}", f"-Xms{infra.kafka_heap}", "-XX:+UseG1GC",
        "-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{HERE / 'log4j.properties'}",
        "-cp", f"{lib_dir(infra)}/*", main, *args,
    ]


def start(infra: InfraSettings, proc: ManagedProcess) -> None:
    fetch_jars(infra)
    kafka_dir = infra.data_dir / "kafka"
    log_dirs = kafka_dir / "log"
    config = kafka_dir / "server.properties"
    kafka_dir.mkdir(parents=True, exist_ok=True)
    config.write_text(server_properties(infra, log_dirs))
    if not (log_dirs / "meta.properties").exists():
        fmt = subprocess.run(
            # `=`: a base64 id may start with "-", which argparse would take for an option.
            java_cmd(infra, "kafka.tools.StorageTool", "format", f"--cluster-id={_cluster_id()}",
                     f"--config={config}"),
            capture_output=True, text=True, timeout=120,
        )
        if fmt.returncode != 0:
            raise InfraError(f"formatting Kafka storage failed: {fmt.stdout}{fmt.stderr}".strip())
    proc.start(java_cmd(infra, "kafka.Kafka", str(config)))


async def healthy(bootstrap: str, timeout_s: float = 5.0) -> bool:
    """The broker answers a metadata request and has a controller."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    if not port_is_listening(host, int(port)):
        return False  # checked first so a stopped broker does not flood the log
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await asyncio.wait_for(admin.start(), timeout_s)
        cluster = await asyncio.wait_for(admin.describe_cluster(), timeout_s)
        return cluster.get("controller_id", -1) >= 0
    except Exception:
        return False
    finally:
        try:
            await asyncio.wait_for(admin.close(), timeout_s)
        except Exception:
            pass
