"""The Helm chart (deploy/helm/webgym) rendered by the real helm and validated offline
(devtools/chart_validate.sh: the Kubernetes schemas and the CRDs' own), then read back: every
process compose runs has its Deployment whose command is a real `webgym worker` command and
whose environment loads into the settings the topics were made for; every KafkaTopic has the
registry's partitions, cleanup and retention; the browser's ScaledObject watches the registry's
group on a topic it reads, never above its partition count; secrets only by reference.

No cluster: `helm template` only. The first run builds helm with `go install` (a few
minutes, cached under ${WEBGYM_HOME:-~/.cache/webgym}/tools); later runs take seconds.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import typer
import typer.core
import typer.main
import yaml

from webgym_cli.main import app
from webgym_common.config import PROJECT_ROOT, KafkaSettings, Settings
from webgym_common.processes import PROCESSES, Process
from webgym_common.topics import (
    Group,
    Topic,
    all_topic_specs,
    group_id,
    min_insync_replicas,
    topic_name,
    topic_specs,
)

SCRIPT = PROJECT_ROOT / "devtools" / "chart_validate.sh"
CHART = PROJECT_ROOT / "deploy" / "helm" / "webgym"
RENDERINGS = ("default", "scaled", "external")
# The Kafka settings each rendering's values give (values.yaml, ci/*-values.yaml).
KAFKA = {
    "default": KafkaSettings(replication_factor=3),
    "scaled": KafkaSettings(replication_factor=3),
    "external": KafkaSettings(topic_prefix="prod", partitions=16, replication_factor=3,
                              replay_retention_ms=1_209_600_000),
}
SECRET_NAMES = ("PASSWORD", "SECRET", "API_KEY", "HF_TOKEN")
# The first test builds helm when it is not cached yet (go install: minutes).
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Each rendering's documents, after the script validated them all."""
    out = tmp_path_factory.mktemp("chart")
    result = subprocess.run(["bash", str(SCRIPT), "--out", str(out)], capture_output=True,
                            text=True, timeout=1800)
    assert result.returncode == 0, result.stdout + result.stderr
    docs = {}
    for name in RENDERINGS:
        docs[name] = [d for d in yaml.safe_load_all((out / f"{name}.yaml").read_text()) if d]
        assert f"{name}.yaml: {len(docs[name])} documents" in result.stdout, result.stdout
    assert "ERROR" not in result.stdout
    return docs


@pytest.fixture(scope="module")
def helm(rendered: dict[str, Any]) -> str:
    result = subprocess.run(["bash", str(SCRIPT), "--print-helm"], capture_output=True,
                            text=True, timeout=1800, check=True)
    return result.stdout.strip()


def template(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, "template", "webgym", str(CHART), "--namespace", "webgym",
                           "--kube-version", "1.33.0", *args],
                          capture_output=True, text=True, timeout=120)


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    [only] = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(only, dict)
    return only


def env_of(deployment: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(deployment)["env"]}


@pytest.fixture
def settings_from(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The settings a container loads from its environment (a secret read as "s3cret")."""
    def load(deployment: dict[str, Any]) -> Settings:
        for name in [n for n in os.environ if n.startswith("WEBGYM_")]:
            monkeypatch.delenv(name)
        for name, value in env_of(deployment).items():
            monkeypatch.setenv(name, value if isinstance(value, str) else "s3cret")
        return Settings()
    yield load


def compose_processes() -> list[str]:
    return [s.name.value for s in PROCESSES.values() if s.compose]


@pytest.mark.parametrize("name", ["default", "scaled"])
def test_every_process_compose_runs_has_a_deployment(
        rendered: dict[str, list[dict[str, Any]]], name: str) -> None:
    deployments = of_kind(rendered[name], "Deployment")
    walk: dict[tuple[str, ...], Any] = {}

    def commands(command: Any, path: tuple[str, ...]) -> None:
        if isinstance(command, typer.core.TyperGroup):
            for sub, child in command.commands.items():
                commands(child, (*path, sub))
        else:
            walk[path] = command

    commands(typer.main.get_command(app), ())
    for process in compose_processes():
        deployment = deployments[f"webgym-{process}"]
        c = container(deployment)
        assert c["command"] == ["webgym", "worker", process]
        # Parses (never runs) the arguments: a wrong option fails here.
        walk[("worker", process)].make_context(f"webgym worker {process}", c.get("args", []))
        spec = PROCESSES[Process(process)]
        # A GPU where compose's service has the gpu profile (the trainer), nowhere else.
        limits = c.get("resources", {}).get("limits", {})
        assert ("nvidia.com/gpu" in limits) is (spec.profile == "gpu"), process
        if not spec.scalable:
            assert deployment["spec"]["replicas"] == 1
            assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert set(deployments) == {f"webgym-{p}" for p in compose_processes()} | {"webgym-sandbox"}


def test_scaled_counts_reach_the_deployments(rendered: dict[str, list[dict[str, Any]]]) -> None:
    deployments = of_kind(rendered["scaled"], "Deployment")
    assert deployments["webgym-browser"]["spec"]["replicas"] == 6
    assert deployments["webgym-policy"]["spec"]["replicas"] == 3
    assert not of_kind(rendered["scaled"], "ScaledObject")
    # Under KEDA the browser Deployment has no count of its own (the HPA's would be reset).
    assert "replicas" not in of_kind(rendered["default"], "Deployment")["webgym-browser"]["spec"]


@pytest.mark.parametrize("name", RENDERINGS)
def test_each_kafka_topic_is_its_registry_row(rendered: dict[str, list[dict[str, Any]]],
                                              name: str) -> None:
    kafka = KAFKA[name]
    topics = {t["spec"]["topicName"]: t for t in of_kind(rendered[name], "KafkaTopic").values()}
    specs = {s.name: s for s in all_topic_specs(kafka)}
    assert set(topics) == set(specs)
    for topic_name_, spec in specs.items():
        resource = topics[topic_name_]["spec"]
        assert resource["partitions"] == spec.partitions, topic_name_
        assert resource["replicas"] == kafka.replication_factor
        assert resource["config"] == {
            **spec.kafka_configs(),
            "min.insync.replicas": str(min_insync_replicas(kafka.replication_factor))}
        assert resource["config"]["cleanup.policy"] == spec.cleanup_policy
        assert int(resource["config"]["retention.ms"]) == spec.retention_ms
    assert {t["metadata"]["labels"]["strimzi.io/cluster"]
            for t in topics.values()} == {"prod-kafka" if name == "external" else "webgym"}


@pytest.mark.parametrize("name", ["default", "external"])
def test_the_browser_scaled_object(rendered: dict[str, list[dict[str, Any]]], name: str) -> None:
    kafka = KAFKA[name]
    [scaled] = of_kind(rendered[name], "ScaledObject").values()
    spec = scaled["spec"]
    partitions = topic_specs(kafka)[Topic.EPISODES].partitions
    assert spec["scaleTargetRef"]["name"] == "webgym-browser"
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] <= partitions
    assert spec["maxReplicaCount"] == (12 if name == "external" else partitions)
    [trigger] = spec["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    assert meta["consumerGroup"] == group_id(kafka, Group.BROWSERS)
    assert PROCESSES[Process.BROWSER].group is Group.BROWSERS
    assert meta["topic"] == topic_name(kafka, Topic.EPISODES)
    assert Topic.EPISODES in PROCESSES[Process.BROWSER].reads
    assert meta["allowIdleConsumers"] == "false"
    browser = of_kind(rendered[name], "Deployment")["webgym-browser"]
    assert meta["bootstrapServers"] == env_of(browser)["WEBGYM_KAFKA__BOOTSTRAP_SERVERS"]
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] >= 300
    assert ("authenticationRef" in trigger) is (name == "external")


@pytest.mark.parametrize("name", RENDERINGS)
def test_the_processes_load_the_settings_the_topics_were_made_for(
        rendered: dict[str, list[dict[str, Any]]], name: str, settings_from: Any) -> None:
    kafka = KAFKA[name]
    statefulsets = of_kind(rendered[name], "StatefulSet")
    for process in compose_processes():
        deployment = of_kind(rendered[name], "Deployment").get(f"webgym-{process}")
        if deployment is None:
            continue  # disabled in this rendering
        settings = settings_from(deployment)
        for field in ("topic_prefix", "partitions", "replication_factor", "default_retention_ms",
                      "scored_retention_ms", "replay_retention_ms"):
            assert getattr(settings.kafka, field) == getattr(kafka, field), (process, field)
        if statefulsets:
            # Every vLLM replica by its stable DNS name: <pod>.<headless service>.
            [vllm] = statefulsets.values()
            pods = [f"{vllm['metadata']['name']}-{i}.{vllm['spec']['serviceName']}"
                    for i in range(vllm["spec"]["replicas"])]
            assert [u.split("//")[1].split(".svc.")[0] for u in settings.policy.replicas] == [
                f"{pod}.webgym" for pod in pods]
        else:
            assert settings.policy.replicas == ("https://model-a.example.org/v1",
                                                "https://model-b.example.org/v1")


def test_vllm_replicas_and_the_model_loader_share_the_checkpoints(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    [vllm] = of_kind(rendered["scaled"], "StatefulSet").values()
    assert vllm["spec"]["replicas"] == 4
    headless = of_kind(rendered["scaled"], "Service")[vllm["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    loader = of_kind(rendered["scaled"], "Deployment")["webgym-model-loader"]
    claim = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName")
             for v in loader["spec"]["template"]["spec"]["volumes"]}["data"]
    assert env_of(loader)["WEBGYM_INFRA__DATA_DIR"] == "/checkpoints"
    vllm_claims = [v["persistentVolumeClaim"]["claimName"]
                   for v in vllm["spec"]["template"]["spec"]["volumes"]
                   if "persistentVolumeClaim" in v]
    assert vllm_claims == [claim]
    assert {m["mountPath"] for m in container(vllm)["volumeMounts"]} >= {"/checkpoints"}


@pytest.mark.parametrize("name", RENDERINGS)
def test_secrets_only_by_reference(rendered: dict[str, list[dict[str, Any]]], name: str) -> None:
    for doc in rendered[name]:
        if doc["kind"] not in ("Deployment", "StatefulSet"):
            continue
        for c in doc["spec"]["template"]["spec"]["containers"]:
            for e in c.get("env", []):
                if any(s in e["name"] for s in SECRET_NAMES):
                    assert "value" not in e and "secretKeyRef" in e["valueFrom"], (
                        doc["metadata"]["name"], e)
    assert not of_kind(rendered[name], "Secret")


def test_the_chart_refuses_what_would_break(helm: str) -> None:
    too_many = template(helm, "--set", "keda.maxReplicaCount=9")
    assert too_many.returncode != 0 and "has 8 partitions" in too_many.stderr
    assert template(helm, "--set", "keda.maxReplicaCount=16",
                    "--set", "kafka.partitions=16").returncode == 0
    single = template(helm, "--set", "processes.trainer.replicas=2")
    assert single.returncode != 0 and "not scalable" in single.stderr
    typo = template(helm, "--set", "processes.browsers.replicas=2")
    assert typo.returncode != 0 and "no such process" in typo.stderr
    assert "kafka.sasl.existingSecret" in template(
        helm, "--set", "kafka.securityProtocol=SASL_SSL").stderr


def test_values_documented_in_the_docs() -> None:
    """Every top-level value has its line in docs/kubernetes.md."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    page = (PROJECT_ROOT / "docs" / "kubernetes.md").read_text()
    missing = [key for key in values if f"`{key}" not in page]
    assert not missing, missing
