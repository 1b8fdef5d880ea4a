"""Static checks of docker-compose.replicas.yml (two vLLM replicas, one GPU each) and
docker-compose.replicas.local.yml (the two as CPU vLLMs, with docker-compose.local.yml).

The files are merged as compose merges them (tests.support.compose_merge), and, where the
docker compose plugin is installed, that merge is compared with `docker compose config`
itself. Nothing here starts a container: the replicas are validated offline, not run on GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest

from tests.support.compose_files import CREDENTIAL, ROOT, variables
from tests.support.compose_merge import merged_services
from tests.unit.test_compose import PASSWORDS, USES_MODEL_SERVER
from webgym_common.config import Settings

MAIN = "docker-compose.yml"
LOCAL = "docker-compose.local.yml"
REPLICAS = "docker-compose.replicas.yml"
REPLICAS_LOCAL = "docker-compose.replicas.local.yml"

GPU = [MAIN, REPLICAS]
CPU = [MAIN, LOCAL, REPLICAS, REPLICAS_LOCAL]
STACKS = {"gpu": GPU, "cpu": CPU}

REPLICA_SERVICES = ("vllm", "vllm-2")
URLS = ("http://vllm:8000/v1", "http://vllm-2:8000/v1")
# What compose needs set to render the files (the credentials have no default).
ENV = {"MINIO_ROOT_USER": "webgym", "MINIO_ROOT_PASSWORD": "root-password",
       "VLLM_API_KEY": "vllm-key", "WEBGYM_MODEL_DIR": "/srv/models/smollm2",
       **{name: f"{name.lower()}-value" for name in PASSWORDS}}
# Where the two replicas may differ: the GPU each one gets, and the cores a CPU one binds.
PER_REPLICA = {"deploy"}
PER_REPLICA_ENV = {"VLLM_CPU_OMP_THREADS_BIND"}


@pytest.fixture(scope="module", params=sorted(STACKS))
def stack(request: pytest.FixtureRequest) -> tuple[str, dict[str, dict[str, Any]]]:
    return request.param, merged_services(STACKS[request.param], ENV)


def same_model_server(svc: dict[str, Any]) -> dict[str, Any]:
    """A replica's definition less what is its own (its GPU, its cores)."""
    out = {k: v for k, v in svc.items() if k not in PER_REPLICA}
    out["environment"] = {k: v for k, v in svc["environment"].items()
                          if k not in PER_REPLICA_ENV}
    return out


def test_both_replicas_serve_the_same_model_the_same_way(
    stack: tuple[str, dict[str, dict[str, Any]]],
) -> None:
    _, services = stack
    first, second = (services[name] for name in REPLICA_SERVICES)
    assert same_model_server(first) == same_model_server(second)
    argv = first["command"]
    assert argv[argv.index("--served-model-name") + 1] == "webgym-policy"
    assert "--enable-lora" in argv and "--max-lora-rank" in argv
    assert first["environment"]["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert second["environment"]["VLLM_API_KEY"] == ENV["VLLM_API_KEY"]
    # The adapters the model loader fetches resolve at the same path in both (read-only).
    assert second["volumes"]["/checkpoints"] == {
        "source": "checkpoints", "target": "/checkpoints", "read_only": True}
    assert services["model-loader"]["environment"]["WEBGYM_INFRA__DATA_DIR"] == "/checkpoints"
    assert second["profiles"] == ["gpu"] and not second.get("ports")


def test_the_gpu_replicas_run_the_main_files_model_each_on_its_own_gpu() -> None:
    main = merged_services([MAIN], ENV)
    services = merged_services(GPU, ENV)
    for name in REPLICA_SERVICES:
        # model, revision, tokenizer revision, served name, LoRA: the main file's, as they are
        assert services[name]["command"] == main["vllm"]["command"]
        assert services[name]["image"] == main["vllm"]["image"]
    main_devices = main["vllm"]["deploy"]["resources"]["reservations"]["devices"]
    assert [d.get("count") for d in main_devices] == ["all"]
    gpus = []
    for name in REPLICA_SERVICES:
        (device,) = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        assert "count" not in device  # exclusive with device_ids
        gpus.append(tuple(device["device_ids"]))
    assert gpus == [("0",), ("1",)]
    moved = merged_services(GPU, {**ENV, "WEBGYM_VLLM_GPU": "2", "WEBGYM_VLLM_2_GPU": "3"})
    assert [moved[n]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"]
            for n in REPLICA_SERVICES] == [["2"], ["3"]]


def test_the_cpu_replicas_are_the_local_files_vllm_without_a_gpu() -> None:
    local = merged_services([MAIN, LOCAL], ENV)
    services = merged_services(CPU, ENV)
    for name in REPLICA_SERVICES:
        svc = services[name]
        assert "deploy" not in svc
        assert svc["image"] == local["vllm"]["image"] == "webgym-vllm-cpu:local"
        assert svc["command"] == local["vllm"]["command"]
        assert svc["volumes"] == local["vllm"]["volumes"]
        assert svc["environment"]["CUDA_VISIBLE_DEVICES"] == ""
    binds = merged_services(CPU, {**ENV, "WEBGYM_VLLM_THREADS_BIND": "0-7",
                                  "WEBGYM_VLLM_2_THREADS_BIND": "8-15"})
    assert [binds[n]["environment"]["VLLM_CPU_OMP_THREADS_BIND"]
            for n in REPLICA_SERVICES] == ["0-7", "8-15"]


@pytest.mark.parametrize("caller", sorted(USES_MODEL_SERVER))
def test_every_model_caller_loads_both_replicas_into_its_settings(
    stack: tuple[str, dict[str, dict[str, Any]]], caller: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, services = stack
    for name in list(os.environ):
        if name.startswith("WEBGYM_"):
            monkeypatch.delenv(name)
    for name, value in services[caller]["environment"].items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.policy.replica_urls == URLS
    # The LLM judge asks policy.base_url (its own base_url unset): the first replica.
    assert settings.policy.base_url == URLS[0] and not settings.evaluator.base_url
    # Each URL names a replica service, on the port it serves.
    assert {u.split("//")[1].split(":")[0] for u in URLS} == set(REPLICA_SERVICES)


def test_the_replica_list_can_be_replaced_from_the_environment() -> None:
    elsewhere = '["http://vllm:8000/v1", "http://gpu-box:8000/v1"]'
    services = merged_services(GPU, {**ENV, "WEBGYM_POLICY_REPLICAS": elsewhere})
    for caller in USES_MODEL_SERVER:
        assert services[caller]["environment"]["WEBGYM_POLICY__REPLICAS"] == elsewhere


def test_the_policy_and_the_loader_wait_for_both_replicas_when_they_run(
    stack: tuple[str, dict[str, dict[str, Any]]],
) -> None:
    _, services = stack
    for caller in ("policy", "model-loader"):
        for name in REPLICA_SERVICES:
            # required: false: without --profile gpu they talk to WEBGYM_POLICY_BASE_URL
            assert services[caller]["depends_on"][name] == {
                "condition": "service_healthy", "required": False}, (caller, name)


def test_the_replica_files_add_no_credential() -> None:
    for name in (REPLICAS, REPLICAS_LOCAL):
        text = (ROOT / name).read_text()
        assert not [v for v, _, _ in variables(text) if CREDENTIAL.search(v)], name
    services = merged_services(GPU, ENV)
    for name, svc in services.items():
        holds = any(ENV["VLLM_API_KEY"] == v for v in svc.get("environment", {}).values())
        assert holds == (name in {*REPLICA_SERVICES, *USES_MODEL_SERVER}), name


COMPOSE = shutil.which("docker")


def docker_compose_config(files: list[str]) -> dict[str, Any] | None:
    if COMPOSE is None:
        return None
    try:
        version = subprocess.run([COMPOSE, "compose", "version"], capture_output=True,
                                 text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if version.returncode != 0:
        return None
    args = [COMPOSE, "compose", "--project-directory", str(ROOT)]
    for name in files:
        args += ["-f", str(ROOT / name)]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WEBGYM_", "COMPOSE_", "MINIO_", "VLLM_"))}
    out = subprocess.run([*args, "--profile", "gpu", "config", "--format", "json"],
                         capture_output=True, text=True, timeout=60, check=True,
                         env={**env, **ENV}, cwd=ROOT)
    config: dict[str, Any] = json.loads(out.stdout)
    return config


@pytest.mark.parametrize("kind", sorted(STACKS))
def test_the_merge_here_is_what_docker_compose_config_says(kind: str) -> None:
    config = docker_compose_config(STACKS[kind])
    if config is None:
        pytest.skip("no docker compose plugin here")
    ours = merged_services(STACKS[kind], ENV)
    theirs = config["services"]
    for name in (*REPLICA_SERVICES, *USES_MODEL_SERVER):
        mine, real = ours[name], theirs[name]
        assert mine["command"] == real["command"], name
        assert mine["image"] == real["image"], name
        assert mine["environment"] == real["environment"], name
        assert {k: v["condition"] for k, v in mine.get("depends_on", {}).items()} == {
            k: v["condition"] for k, v in real.get("depends_on", {}).items()}, name
        assert {(v["source"], v["target"], bool(v.get("read_only"))) for v in
                mine.get("volumes", {}).values()} == {
            (str(v["source"]), v["target"], bool(v.get("read_only")))
            for v in real.get("volumes", [])}, name
        devices = [{k: d[k] for k in ("device_ids", "count") if k in d}
                   for d in (real.get("deploy") or {}).get("resources", {})
                   .get("reservations", {}).get("devices", [])]
        assert devices == [{k: d[k] for k in ("device_ids", "count") if k in d}
                           for d in (mine.get("deploy") or {}).get("resources", {})
                           .get("reservations", {}).get("devices", [])], name
