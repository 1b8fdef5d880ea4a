"""Static checks of the stack docker-compose.yml declares (how it runs the project's own
processes: test_compose_pipeline.py; docker-compose.local.yml: test_compose_local.py; the
Dockerfile: test_dockerfile.py).

These read the files (in a second, without a Docker engine; tests/compose runs the stack
for real) and check the contracts the stack depends on: which services exist, how they wait
for each other, what is published to the host (127.0.0.1 only) and which credentials it
needs (from the environment, never a default). (`interpolate` does compose's variable
substitution.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra import minio_users
from tests.support.compose_files import (
    CREDENTIAL,
    MissingVariable,
    as_argv,
    depends_on,
    environment,
    interpolate,
    port_bindings,
    published_ports,
    variables,
    volume_mounts,
)
from webgym_common.processes import PROCESSES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"

PROJECT_IMAGE = "webgym-stream:latest"

# Registry images by digest: a tag can be moved to other content, a digest cannot.
INFRA_IMAGES = {
    "broker": "redpandadata/redpanda:v24.2.7@sha256:"
              "82a69763bef8d8b55ea5a520fa1b38f993908ef68946819ca1aed43541824c48",
    "console": "docker.redpanda.com/redpandadata/console:v2.7.2",
    "minio": "minio/minio:RELEASE.2025-04-22T22-12-26Z@sha256:"
             "a1ea29fa28355559ef137d71fc570e508a214ec84ff8083e39bc5428980b015e",
    "vllm": "vllm/vllm-openai:v0.11.0@sha256:"
            "014a95f21c9edf6abe0aea6b07353f96baa4ec291c427bb1176dc7c93a85845c",
}
# No digest of the console's tag could be checked from here; it runs only with its profile.
UNPINNED_OPT_IN = {"console"}
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")

# Every process of the registry whose row says `compose` is a service running its worker
# command (the browser with its contexts; the optional env server too: compose runs every
# service it declares), beside the controller and the monitor.
WORKER_ARGUMENTS = {"browser": ["--contexts", "8"]}
PIPELINE_COMMANDS = {
    **{s.name.value: ["webgym", "worker", s.name.value, *WORKER_ARGUMENTS.get(s.name.value, [])]
       for s in PROCESSES.values() if s.compose},
    "controller": ["webgym", "rollout", "--split", "train"],
    "monitor": ["webgym", "monitor"],
}

# Services built from the project image: the pipeline plus the one-shot init (the trainer
# is built from the same Dockerfile, target `trainer`, as an image of its own).
PROJECT_SERVICES = {*PIPELINE_COMMANDS, "topic-init", "minio-users", "sandbox"} - {"trainer"}

EXPECTED_SERVICES = {*INFRA_IMAGES, *PROJECT_SERVICES}

# Each with a MinIO user of its own (infra/minio_users.py): the processes whose rows say
# `object_store`, and the monitor.
USES_OBJECT_STORE = {s.name.value for s in PROCESSES.values() if s.object_store} | {"monitor"}
# The services that call the model server (the policy, the judge, LoRA hot-loading).
USES_MODEL_SERVER = {"policy", "evaluator", "model-loader"}
MINIO_ROOT = {"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"}
PASSWORDS = {minio_users.password_variable(s) for s in minio_users.ACCESS}

VALID_CONDITIONS = {
    "service_started",
    "service_healthy",
    "service_completed_successfully",
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict), "docker-compose.yml must be a mapping"
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    svcs = compose.get("services")
    assert isinstance(svcs, dict) and svcs, "no services declared"
    return svcs


def test_expected_services_exist(services: dict[str, dict[str, Any]]) -> None:
    missing = EXPECTED_SERVICES - services.keys()
    assert not missing, f"missing services: {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(INFRA_IMAGES))
def test_infra_images_are_pinned(services: dict[str, dict[str, Any]], name: str) -> None:
    assert services[name].get("image") == INFRA_IMAGES[name]
    assert "build" not in services[name]


def test_every_pulled_image_carries_a_digest(services: dict[str, dict[str, Any]]) -> None:
    pulled = {name: svc["image"] for name, svc in services.items() if "build" not in svc}
    assert pulled.keys() == INFRA_IMAGES.keys()
    unpinned = {name for name, image in pulled.items() if not DIGEST.search(image)}
    assert unpinned == UNPINNED_OPT_IN
    for name in unpinned:  # never started by a plain `docker compose up`
        assert services[name].get("profiles"), name


@pytest.mark.parametrize("name", sorted(PROJECT_SERVICES))
def test_project_services_build_the_project_image(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    svc = services[name]
    build = svc.get("build")
    context = build.get("context") if isinstance(build, dict) else build
    assert context in (".", "./"), f"{name}: build context is {context!r}"
    assert svc.get("image") == PROJECT_IMAGE


@pytest.mark.parametrize(
    ("name", "ports"),
    [
        ("broker", {19092}),
        ("minio", {9000, 9001}),
        ("console", {8080}),
        ("monitor", {18780}),
        ("envserver", {18790}),
    ],
)
def test_published_ports(services: dict[str, dict[str, Any]], name: str, ports: set[int]) -> None:
    assert ports <= published_ports(services[name])


def test_every_published_port_binds_loopback_only(services: dict[str, dict[str, Any]]) -> None:
    bindings = {name: port_bindings(svc) for name, svc in services.items()}
    assert any(bindings.values()), "nothing is published: the check would be vacuous"
    wide = {name: b for name, b in bindings.items() if any(ip != "127.0.0.1" for ip, _ in b)}
    assert not wide, f"published on more than 127.0.0.1: {wide}"


def test_port_bindings_reads_every_syntax() -> None:
    assert port_bindings({"ports": [
        "9000:9000", "127.0.0.1:9001:9001", "8000", "0.0.0.0:1:1/udp", "[::1]:2:2",
        {"target": 80, "published": 8080, "host_ip": "127.0.0.1"}, {"target": 81, "published": 81},
    ]}) == [("", "9000"), ("127.0.0.1", "9001"), ("", ""), ("0.0.0.0", "1"), ("::1", "2"),
            ("127.0.0.1", "8080"), ("", "81")]


def test_vllm_is_reachable_only_on_the_compose_network(
    services: dict[str, dict[str, Any]],
) -> None:
    svc = services["vllm"]
    assert not svc.get("ports"), "vLLM loads LoRA adapters at runtime: publish nothing"
    assert svc.get("network_mode") is None  # not "host"


def test_no_credential_has_a_working_default() -> None:
    text = COMPOSE_FILE.read_text()
    used = variables(text)
    credentials = {name for name, _, _ in used if CREDENTIAL.search(name)}
    assert {*MINIO_ROOT, "VLLM_API_KEY", *PASSWORDS} <= credentials
    for name, op, arg in used:
        if CREDENTIAL.search(name) and op is not None and op.endswith("-"):
            assert arg == "", f"${{{name}{op}{arg}}} gives a credential a default"
    for name in (*MINIO_ROOT, "VLLM_API_KEY", *PASSWORDS):
        ops = {op for n, op, _ in used if n == name}
        assert ops == {":?"}, f"{name} must be required (${{{name}:?...}}) everywhere: {ops}"


def test_compose_refuses_to_start_without_the_credentials() -> None:
    text = COMPOSE_FILE.read_text()
    secrets = {"MINIO_ROOT_USER": "u", "MINIO_ROOT_PASSWORD": "p", "VLLM_API_KEY": "k",
               **{name: "s" for name in PASSWORDS}}
    interpolate(text, secrets)
    for name in secrets:
        with pytest.raises(MissingVariable, match=name):
            interpolate(text, {k: v for k, v in secrets.items() if k != name})
        with pytest.raises(MissingVariable, match=name):
            interpolate(text, {**secrets, name: ""})


def test_interpolate_follows_compose() -> None:
    env = {"A": "a", "E": ""}
    assert interpolate("$A ${A} ${A:-x} ${E:-x} ${E-x} ${U-x} $$A ${A:?no}", env) == (
        "a a a x  x $A a")
    with pytest.raises(MissingVariable, match="U: set U"):
        interpolate("${U:?set U}", env)
    with pytest.raises(MissingVariable, match="E: no"):
        interpolate("${E:?no}", env)
    assert interpolate("${E?no}", env) == ""


def test_redpanda_advertises_internal_and_host_listeners(
    services: dict[str, dict[str, Any]],
) -> None:
    argv = " ".join(as_argv(services["broker"].get("command")))
    advertised = re.search(r"--advertise-kafka-addr[= ](\S+)", argv)
    assert advertised, "redpanda must advertise its Kafka listeners"
    assert "broker:9092" in advertised.group(1)
    assert "localhost:${WEBGYM_BROKER_PORT:-19092}" in advertised.group(1)


def test_redpanda_fsyncs_every_acknowledged_write_and_creates_no_topic(
    services: dict[str, dict[str, Any]],
) -> None:
    """Not dev-container mode: the image's redpanda.yaml turns it on unless developer_mode is
    set off, and it bypasses fsync, acknowledges from cache and auto-creates topics."""
    argv = as_argv(services["broker"].get("command"))
    assert not any("dev-container" in a or a.startswith("--mode") for a in argv), argv
    assert "--unsafe-bypass-fsync=false" in argv  # explicit: the dev default is true
    # rpk reads `--set key=value` only as two arguments, and applies them after the mode.
    sets = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--set"}
    assert {"redpanda.developer_mode=false", "redpanda.auto_create_topics_enabled=false",
            "redpanda.write_caching_default=false",
            "redpanda.enable_metrics_reporter=false"} <= sets
    assert not any(a.startswith("--set=") for a in argv)
    # Small machine, still above the 1 GiB per core Redpanda requires outside developer mode.
    assert "--smp=1" in argv and "--overprovisioned" in argv
    memory = next(a.split("=", 1)[1] for a in argv if a.startswith("--memory="))
    assert memory.endswith("M") and int(memory[:-1]) >= 1024 + 256


def test_the_console_runs_only_with_its_profile_and_the_schema_registry_is_not_published(
    services: dict[str, dict[str, Any]],
) -> None:
    assert services["console"].get("profiles") == ["console"]  # no login, writes topics
    assert published_ports(services["broker"]) == {19092}
    argv = " ".join(as_argv(services["broker"].get("command")))
    assert "--schema-registry-addr=internal://0.0.0.0:8081" in argv and "18081" not in argv


def test_the_env_server_answers_its_service_name(services: dict[str, dict[str, Any]]) -> None:
    env = environment(services["envserver"])
    assert "envserver" in json.loads(env["WEBGYM_ENVSERVER__ALLOWED_HOSTS"])


def test_depends_on_targets_exist_with_valid_conditions(
    services: dict[str, dict[str, Any]],
) -> None:
    problems = []
    for name, svc in services.items():
        for target, spec in depends_on(svc).items():
            if target not in services:
                problems.append(f"{name} -> {target}: no such service")
            if target == name:
                problems.append(f"{name} depends on itself")
            condition = spec.get("condition", "service_started")
            if condition not in VALID_CONDITIONS:
                problems.append(f"{name} -> {target}: invalid condition {condition!r}")
    assert not problems, problems


def test_depends_on_has_no_cycles(services: dict[str, dict[str, Any]]) -> None:
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        assert state.get(name) != "visiting", f"cycle: {' -> '.join([*path, name])}"
        state[name] = "visiting"
        for target in depends_on(services.get(name, {})):
            visit(target, [*path, name])
        state[name] = "done"

    for name in services:
        visit(name, [])


@pytest.mark.parametrize("name", ["broker", "minio", "vllm", "sandbox"])
def test_infra_has_healthcheck(services: dict[str, dict[str, Any]], name: str) -> None:
    test = as_argv(services[name].get("healthcheck", {}).get("test"))
    assert test and test[0] != "NONE", f"{name} needs a healthcheck"


def test_redpanda_healthcheck_checks_cluster_health(services: dict[str, dict[str, Any]]) -> None:
    test = " ".join(as_argv(services["broker"]["healthcheck"]["test"]))
    assert "rpk cluster health" in test
    assert "Healthy:" in test


def test_vllm_healthcheck_hits_health_endpoint(services: dict[str, dict[str, Any]]) -> None:
    test = " ".join(as_argv(services["vllm"]["healthcheck"]["test"]))
    assert "/health" in test


def test_service_healthy_targets_have_healthchecks(
    services: dict[str, dict[str, Any]],
) -> None:
    for name, svc in services.items():
        for target, spec in depends_on(svc).items():
            if spec.get("condition") == "service_healthy":
                hc = services.get(target, {}).get("healthcheck") or {}
                assert hc.get("test") and not hc.get("disable"), (
                    f"{name} waits for {target} to be healthy but it has no healthcheck"
                )


def test_topic_init_creates_topics_once(services: dict[str, dict[str, Any]]) -> None:
    svc = services["topic-init"]
    assert as_argv(svc.get("command"))[:3] == ["webgym", "topics", "create"]
    assert str(svc.get("restart")) == "no"
    deps = depends_on(svc)
    assert deps.get("broker", {}).get("condition") == "service_healthy"


def test_the_browser_holds_no_root_or_admin_credential(
    services: dict[str, dict[str, Any]],
) -> None:
    """A compromised browser worker finds its own MinIO user, which may only write
    screenshots, and nothing else: no MinIO root, no model server key, no broker admin."""
    env = environment(services["browser"])
    text = " ".join(env.values())
    assert not any(root in text for root in MINIO_ROOT)
    assert "VLLM_API_KEY" not in text and "HF_TOKEN" not in env
    assert not [k for k in env if re.search(r"SASL|ADMIN|PASSWORD|TOKEN", k)]
    assert env["WEBGYM_S3__ACCESS_KEY"] == "webgym-browser"
    assert env["WEBGYM_S3__SECRET_KEY"] == (
        "${MINIO_BROWSER_PASSWORD:?set MINIO_BROWSER_PASSWORD}")
    assert minio_users.ACCESS["browser"] == minio_users.Access(
        writes=minio_users.SCREENSHOTS)


def test_the_minio_users_are_the_object_store_rows_and_the_monitor() -> None:
    assert set(minio_users.ACCESS) == USES_OBJECT_STORE


def test_each_object_store_service_has_its_own_user(
    services: dict[str, dict[str, Any]],
) -> None:
    users = services["minio-users"]
    made = environment(users)
    for name, svc in services.items():
        env = environment(svc)
        if name in USES_OBJECT_STORE:
            variable = minio_users.password_variable(name)
            assert env["WEBGYM_S3__ACCESS_KEY"] == minio_users.access_key(name), name
            assert env["WEBGYM_S3__SECRET_KEY"] == f"${{{variable}:?set {variable}}}", name
            assert made[variable] == env["WEBGYM_S3__SECRET_KEY"], name  # the same password
            assert depends_on(svc)["minio-users"]["condition"] == (
                "service_completed_successfully"), name
        elif name != "minio-users":
            assert "WEBGYM_S3__ACCESS_KEY" not in env and "WEBGYM_S3__SECRET_KEY" not in env, name
        holders = {k for k, v in env.items() if any(r in v for r in MINIO_ROOT)}
        assert not holders or name in ("minio", "minio-users"), f"{name}: {holders}"
    # Only the one-shot service holds the root user, and it runs once.
    assert as_argv(users["command"]) == ["webgym", "infra", "minio-users"]
    assert str(users.get("restart")) == "no"
    assert depends_on(users) == {"minio": {"condition": "service_healthy"}}
    assert made["WEBGYM_S3__ACCESS_KEY"] == "${MINIO_ROOT_USER:?set MINIO_ROOT_USER}"


def test_the_model_servers_key_only_where_it_is_called(
    services: dict[str, dict[str, Any]],
) -> None:
    for name, svc in services.items():
        if name in ("vllm", *INFRA_IMAGES):
            continue
        holds = any("VLLM_API_KEY" in v for v in environment(svc).values())
        assert holds == (name in USES_MODEL_SERVER), name


def test_the_gpu_models_revision_is_pinned(services: dict[str, dict[str, Any]]) -> None:
    argv = as_argv(services["vllm"]["command"])
    revision = argv[argv.index("--revision") + 1]
    assert argv[argv.index("--tokenizer-revision") + 1] == revision
    assert re.fullmatch(r"\$\{WEBGYM_MODEL_REVISION:-[0-9a-f]{40}\}", revision)
    trainer = environment(services["trainer"])
    assert trainer["WEBGYM_TRAINER__BASE_MODEL_REVISION"] == revision


def test_named_volumes_declared(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    declared = set((compose.get("volumes") or {}).keys())
    assert {"checkpoints", "hf-cache"} <= declared
    assert any("broker" in v for v in declared)
    assert any("minio" in v for v in declared)
    for name, svc in services.items():
        for source in volume_mounts(svc):
            if not source.startswith((".", "/", "~")):
                assert source in declared, f"{name} mounts undeclared volume {source}"


def test_browser_is_scalable(services: dict[str, dict[str, Any]]) -> None:
    svc = services["browser"]
    assert "container_name" not in svc
    assert not published_ports(svc), "a fixed host port would collide when scaled"
