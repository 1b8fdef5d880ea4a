"""deploy/helm/webgym/registry.yaml is what the registries give (devtools/chart.py): the
processes compose runs, every topic with partitions, cleanup and retention that resolve to the
registry's own specs under any Kafka settings, and the browser's group and topic. The
rendered chart itself is checked by tests/chart (helm)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import chart, crd_schema
from tests.unit.test_compose import USES_MODEL_SERVER
from webgym_common.config import KafkaSettings
from webgym_common.processes import PROCESSES, Process
from webgym_common.topics import Group, Topic, all_topic_specs, min_insync_replicas, topic_specs

SCHEMAS = chart.PROJECT_ROOT / "deploy" / "helm" / "schemas"


@pytest.fixture(scope="module")
def registry() -> dict[str, Any]:
    loaded = yaml.safe_load(chart.TARGET.read_text())
    assert isinstance(loaded, dict)
    return loaded


def resolve(value: Any, kafka: KafkaSettings) -> int:
    """A registry.yaml number as the chart's templates resolve it (webgym.resolve), with the
    chart's kafka values set to these settings."""
    if isinstance(value, dict):
        names = {chart.camel(n): n for n in chart.TOPIC_SETTINGS}
        return int(getattr(kafka, names[value["setting"]]))
    return int(value)


def test_committed_file_is_what_the_registries_give() -> None:
    assert chart.TARGET.read_text() == chart.render(), (
        "deploy/helm/webgym/registry.yaml is stale: run .venv/bin/python -m devtools.chart")


def test_check_mode_fails_on_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          ) -> None:
    out = tmp_path / "registry.yaml"
    out.write_text("old\n")
    assert chart.main(["--check", "--out", str(out)]) == 1
    assert "stale" in capsys.readouterr().err
    assert chart.main(["--out", str(out)]) == 0
    assert chart.main(["--check", "--out", str(out)]) == 0


def test_one_process_per_row_that_compose_runs(registry: dict[str, Any]) -> None:
    rows = [s for s in PROCESSES.values() if s.compose]
    assert [p["name"] for p in registry["processes"]] == [s.name.value for s in rows]
    for spec, proc in zip(rows, registry["processes"], strict=True):
        assert proc["command"] == ["webgym", "worker", spec.name.value]
        assert proc["scalable"] is spec.scalable
        assert proc["group"] == (spec.group.value if spec.group else None)
        assert (proc["objectStore"] is not None) is spec.object_store
        assert proc["gpu"] is (spec.profile == "gpu")
    # The model server's key goes where compose gives it.
    assert {p["name"] for p in registry["processes"] if p["modelServer"]} == USES_MODEL_SERVER
    trainer = {p["name"]: p for p in registry["processes"]}["trainer"]
    assert trainer["image"] == "trainer" and trainer["gpu"]
    envserver = {p["name"]: p for p in registry["processes"]}["envserver"]
    assert envserver["server"] == {"hostEnv": "WEBGYM_ENVSERVER__HOST", "port": 18790,
                                   "allowedHostsEnv": "WEBGYM_ENVSERVER__ALLOWED_HOSTS"}


@pytest.mark.parametrize("kafka", [
    KafkaSettings(),
    KafkaSettings(topic_prefix="prod", partitions=16, default_retention_ms=86_400_000,
                  scored_retention_ms=-1, replay_retention_ms=1_209_600_000),
    KafkaSettings(topic_prefix="t", partitions=1, scored_retention_ms=3_600_000),
], ids=["defaults", "production", "one-partition"])
def test_topics_resolve_to_the_registry_specs(registry: dict[str, Any],
                                              kafka: KafkaSettings) -> None:
    """Every topic `webgym topics create` makes (faust's internal ones too), with the
    partitions, cleanup policy, retention and configs the registry gives these settings."""
    specs = all_topic_specs(kafka)
    assert len(registry["topics"]) == len(specs)
    for topic, spec in zip(registry["topics"], specs, strict=True):
        assert kafka.topic_prefix + topic["suffix"] == spec.name
        assert resolve(topic["partitions"], kafka) == spec.partitions, spec.name
        assert resolve(topic["retentionMs"], kafka) == spec.retention_ms, spec.name
        assert {**topic["config"], "retention.ms": str(resolve(topic["retentionMs"], kafka))} \
            == spec.kafka_configs(), spec.name
        assert topic["config"]["cleanup.policy"] == spec.cleanup_policy


def test_the_settings_defaults_and_variables(registry: dict[str, Any]) -> None:
    kafka = KafkaSettings()
    for name in chart.TOPIC_SETTINGS:
        row = registry["kafkaSettings"][chart.camel(name)]
        assert row == {"default": getattr(kafka, name), "env": f"WEBGYM_KAFKA__{name.upper()}"}
    assert {int(n): v for n, v in registry["minInsyncReplicas"].items()} == {
        n: min_insync_replicas(n) for n in range(1, chart.MAX_REPLICATION + 1)}


def test_the_browser_scales_on_its_group_and_a_topic_it_reads(registry: dict[str, Any]) -> None:
    browser = registry["scaled"]["browser"]
    spec = PROCESSES[Process.BROWSER]
    assert spec.group is Group.BROWSERS and browser["group"] == Group.BROWSERS.value
    assert browser["topic"] == "." + Topic.EPISODES.value and Topic.EPISODES in spec.reads
    for kafka in (KafkaSettings(), KafkaSettings(partitions=24)):
        assert resolve(browser["partitions"], kafka) == topic_specs(kafka)[
            Topic.EPISODES].partitions


def test_strict_schema_conversion_leaves_property_names_alone() -> None:
    schema = {"type": "object", "properties": {
        "nullable": {"type": "string", "nullable": True},
        "type": {"type": "object", "properties": {"a": {"type": "integer"}}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "open": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
        "quantity": {"x-kubernetes-int-or-string": True},
        "list": {"type": "array", "items": {"type": "object", "properties": {}}},
    }}
    out = crd_schema.strict(schema)
    props = out["properties"]
    assert out["additionalProperties"] is False
    assert props["nullable"]["type"] == ["string", "null"] and "nullable" not in props["nullable"]
    assert props["type"]["additionalProperties"] is False
    assert "additionalProperties" not in props["free"]
    assert props["open"]["additionalProperties"] == {"type": "string"}
    assert props["quantity"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert props["list"]["items"]["additionalProperties"] is False


@pytest.mark.parametrize("name, api_version, kind", [
    ("scaledobject-keda-v1alpha1.json", "keda.sh/v1alpha1", "ScaledObject"),
    ("kafkatopic-kafka-v1beta2.json", "kafka.strimzi.io/v1beta2", "KafkaTopic"),
    ("kafkatopic-kafka-v1.json", "kafka.strimzi.io/v1", "KafkaTopic"),
])
def test_committed_crd_schemas_are_strict(name: str, api_version: str, kind: str) -> None:
    schema = json.loads((SCHEMAS / name).read_text())
    assert schema["properties"]["apiVersion"]["enum"] == [api_version]
    assert schema["properties"]["kind"]["enum"] == [kind]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["spec"]["additionalProperties"] is False
    assert name in (SCHEMAS / "README.md").read_text()
