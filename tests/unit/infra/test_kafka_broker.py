"""infra/kafka_broker.py: each node's server.properties, the node layout, the cluster id."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from infra import kafka_broker
from infra.procs import InfraError
from webgym_common.config import InfraSettings, SettingsError, load_settings


def props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def infra(tmp_path: Path, brokers: int) -> InfraSettings:
    return load_settings(infra={"home": tmp_path, "brokers": brokers, "kafka_port": 30000,
                                "kafka_controller_port": 30001}).infra


def test_one_node_is_named_kafka_and_keeps_one_replica(tmp_path: Path) -> None:
    (node,) = kafka_broker.nodes(infra(tmp_path, 1))
    assert (node.node_id, node.name, node.port, node.controller_port) == (1, "kafka", 30000, 30001)
    p = props(kafka_broker.server_properties(infra(tmp_path, 1), node, [node], tmp_path / "log"))
    assert p["controller.quorum.voters"] == "1@127.0.0.1:30001"
    for key in ("default.replication.factor", "offsets.topic.replication.factor",
                "transaction.state.log.replication.factor", "min.insync.replicas",
                "transaction.state.log.min.isr"):
        assert p[key] == "1", key


def test_three_nodes_form_one_quorum_with_three_replicas_and_min_isr_two(tmp_path: Path) -> None:
    settings = infra(tmp_path, 3)
    cluster = kafka_broker.nodes(settings)
    assert [(n.node_id, n.name, n.port, n.controller_port) for n in cluster] == [
        (1, "kafka-1", 30000, 30001), (2, "kafka-2", 30002, 30003), (3, "kafka-3", 30004, 30005)]
    every = [props(kafka_broker.server_properties(settings, n, cluster,
                                                  kafka_broker.node_dir(settings, n) / "log"))
             for n in cluster]
    voters = "1@127.0.0.1:30001,2@127.0.0.1:30003,3@127.0.0.1:30005"
    for n, p in zip(cluster, every, strict=True):
        assert p["node.id"] == str(n.node_id)
        assert p["process.roles"] == "broker,controller"
        assert p["controller.quorum.voters"] == voters
        assert p["listeners"] == (f"PLAINTEXT://127.0.0.1:{n.port},"
                                  f"CONTROLLER://127.0.0.1:{n.controller_port}")
        assert p["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:{n.port}"
        assert p["log.dirs"] == str(tmp_path / "data" / n.name / "log")
        assert p["default.replication.factor"] == "3"
        assert p["offsets.topic.replication.factor"] == "3"
        assert p["transaction.state.log.replication.factor"] == "3"
        assert p["min.insync.replicas"] == "2"
        assert p["transaction.state.log.min.isr"] == "2"
        assert p["unclean.leader.election.enable"] == "false"
    assert len({p["log.dirs"] for p in every}) == 3


def test_cluster_nodes_have_a_smaller_heap(tmp_path: Path) -> None:
    assert kafka_broker.heap(infra(tmp_path, 1)) == "512m"
    assert kafka_broker.heap(infra(tmp_path, 3)) == "384m"


def test_settings_list_every_broker_and_replicate_three_times(tmp_path: Path) -> None:
    s = load_settings(infra={"home": tmp_path, "brokers": 3})
    assert s.kafka.bootstrap_servers == "127.0.0.1:19092,127.0.0.1:19094,127.0.0.1:19096"
    assert s.kafka.replication_factor == 3
    one = load_settings(infra={"home": tmp_path})
    assert one.kafka.bootstrap_servers == "127.0.0.1:19092" and one.kafka.replication_factor == 1
    # Given values win.
    given = load_settings(infra={"home": tmp_path, "brokers": 3},
                          kafka={"replication_factor": 2, "bootstrap_servers": "b:1"})
    assert (given.kafka.replication_factor, given.kafka.bootstrap_servers) == (2, "b:1")
    five = load_settings(infra={"home": tmp_path, "brokers": 5})
    assert five.kafka.replication_factor == 3


def test_node_ports_must_not_overlap(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="distinct"):
        load_settings(infra={"home": tmp_path, "brokers": 3, "kafka_port": 30000,
                             "kafka_controller_port": 30002})


def test_every_node_is_formatted_with_the_cluster_id_of_the_first_formatted(
    tmp_path: Path,
) -> None:
    settings = infra(tmp_path, 3)
    cluster = kafka_broker.nodes(settings)
    fresh = kafka_broker.cluster_id(settings, cluster)
    assert fresh and fresh != kafka_broker.cluster_id(settings, cluster)  # none formatted yet
    meta = kafka_broker.node_dir(settings, cluster[1]) / "log" / "meta.properties"
    meta.parent.mkdir(parents=True)
    meta.write_text("#\nnode.id=2\nversion=1\ncluster.id=-AbC_123\n")
    assert kafka_broker.cluster_id(settings, cluster) == "-AbC_123"
    assert kafka_broker.formatted_cluster_id("version=1\n") is None


def test_the_started_layout_is_remembered(tmp_path: Path) -> None:
    settings = infra(tmp_path, 3)
    assert kafka_broker.recorded_brokers(settings) is None
    kafka_broker.record_layout(settings)
    assert kafka_broker.recorded_brokers(settings) == 3
    # status and down find every node of it even when the settings say 1
    assert [n.name for n in kafka_broker.nodes(infra(tmp_path, 1), 3)] == [
        "kafka-1", "kafka-2", "kafka-3"]


def test_every_jar_of_the_pinned_kafka_version_has_a_sha256() -> None:
    pins = kafka_broker.jar_pins(InfraSettings().kafka_version)
    assert f"kafka_2.13-{InfraSettings().kafka_version}.jar" in pins
    assert all(len(d) == 64 and int(d, 16) >= 0 for d in pins.values())


def test_a_jar_that_differs_from_its_pin_or_is_not_pinned_is_named(tmp_path: Path) -> None:
    (tmp_path / "a.jar").write_bytes(b"the reviewed bytes")
    pins = {"a.jar": hashlib.sha256(b"the reviewed bytes").hexdigest()}
    assert kafka_broker.jar_mismatches(tmp_path, pins) == []
    (tmp_path / "a.jar").write_bytes(b"a swapped jar")
    (tmp_path / "extra.jar").write_bytes(b"x")
    problems = kafka_broker.jar_mismatches(tmp_path, {**pins, "gone.jar": "0" * 64})
    assert [p.split(":")[0] for p in problems] == ["extra.jar", "gone.jar", "a.jar"]
    assert "is not the pinned" in problems[2]


def test_a_fetch_whose_jars_differ_is_refused_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    infra = load_settings(infra={"home": tmp_path}).infra
    lib = kafka_broker.lib_dir(infra)

    def fake_mvn(*_: object, **__: object) -> subprocess.CompletedProcess[str]:
        lib.mkdir(parents=True, exist_ok=True)
        (lib / f"kafka_2.13-{infra.kafka_version}.jar").write_bytes(b"not the real jar")
        return subprocess.CompletedProcess([], 0, "", "")

    monkeypatch.setattr(kafka_broker, "require_tool", lambda *_: "mvn")
    monkeypatch.setattr(kafka_broker.subprocess, "run", fake_mvn)
    with pytest.raises(InfraError, match="differ from infra/locks/kafka-"):
        kafka_broker.fetch_jars(infra)
    assert not lib.exists()
