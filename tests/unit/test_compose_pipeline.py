"""Static checks of how docker-compose.yml runs the project's own processes (the stack's
services, ports, credentials and start order: test_compose.py).

Every command a project service runs must be a real `webgym` command, the set of real
ones read from the typer app itself; the processes find the broker, MinIO and vLLM by
their service names and share the same credentials; vLLM and the trainer need a GPU and
see checkpoints at the same path.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
import typer.core
import typer.main

from infra import minio_users
from tests.support.compose_files import (
    as_argv,
    depends_on,
    dockerfile_instructions,
    environment,
    volume_mounts,
)
from tests.unit.test_compose import (
    PIPELINE_COMMANDS,
    PROJECT_IMAGE,
    PROJECT_SERVICES,
    USES_MODEL_SERVER,
    USES_OBJECT_STORE,
    compose,
    services,
)
from webgym_cli.main import app
from webgym_common.processes import PROCESSES, Process

__all__ = ["compose", "services"]  # the main file's fixtures, used here too


@pytest.fixture(scope="module")
def webgym_commands() -> dict[tuple[str, ...], Any]:
    """Every runnable `webgym` command (a click command) by its path, e.g. ("worker", "browser").

    Typer builds its click tree with a vendored click, hence typer.core.TyperGroup.
    """
    found: dict[tuple[str, ...], Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if isinstance(command, typer.core.TyperGroup):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        else:
            found[path] = command

    walk(typer.main.get_command(app), ())
    assert found, "the typer app has no commands"
    return found


@pytest.mark.parametrize("process", list(Process))
def test_each_process_row_has_its_service(
    services: dict[str, dict[str, Any]], process: Process,
) -> None:
    """A row's service runs its worker command under the row's profile, holding object-store
    credentials (its own MinIO user's) exactly when the row says `object_store`."""
    spec, name = PROCESSES[process], process.value
    if not spec.compose:
        assert name not in services, f"{name} has a service: its row may say compose=True"
        return
    assert name in services, f"docker-compose.yml: no service for {name} (or compose=False)"
    svc = services[name]
    assert as_argv(svc.get("command"))[:3] == ["webgym", "worker", name]
    assert svc.get("profiles") == ([spec.profile] if spec.profile else None), name
    env = environment(svc)
    assert ("WEBGYM_S3__ACCESS_KEY" in env) is spec.object_store, name
    if spec.object_store:
        assert env["WEBGYM_S3__ACCESS_KEY"] == minio_users.access_key(name)
        assert name in minio_users.ACCESS, f"infra/minio_users.py: no MinIO user for {name}"


@pytest.mark.parametrize("name", sorted(PIPELINE_COMMANDS))
def test_pipeline_service_command(services: dict[str, dict[str, Any]], name: str) -> None:
    svc = services[name]
    argv = as_argv(svc.get("command"))
    assert argv and argv[0] == "webgym", f"{name}: command must start with webgym"
    assert argv == PIPELINE_COMMANDS[name]
    # The image's ENTRYPOINT is `webgym`; a command that names it again must
    # clear the entrypoint or the process would run `webgym webgym ...`.
    assert svc.get("entrypoint") == [], f"{name}: entrypoint must be cleared"


def test_every_project_service_runs_a_real_webgym_command(
    services: dict[str, dict[str, Any]], webgym_commands: dict[tuple[str, ...], Any]
) -> None:
    problems = []
    for name, svc in services.items():
        if svc.get("image") != PROJECT_IMAGE and "build" not in svc:
            continue
        argv = as_argv(svc.get("command"))
        if argv[:1] != ["webgym"]:
            problems.append(f"{name}: {argv} does not run webgym")
            continue
        # The longest leading words that name a command; the rest are its arguments.
        path = next((tuple(argv[1:n]) for n in range(len(argv), 1, -1)
                     if tuple(argv[1:n]) in webgym_commands), None)
        if path is None:
            problems.append(f"{name}: `{' '.join(argv)}` is not a webgym command")
            continue
        try:
            # Parses (never runs) the arguments, so a wrong option fails here too.
            webgym_commands[path].make_context(" ".join(argv[:len(path) + 1]),
                                              argv[len(path) + 1:])
        except typer.TyperException as err:  # click's UsageError and BadParameter
            problems.append(f"{name}: `{' '.join(argv)}`: {err}")
    assert not problems, problems


@pytest.mark.parametrize("name", sorted(PIPELINE_COMMANDS))
def test_pipeline_service_waits_for_topics(services: dict[str, dict[str, Any]], name: str) -> None:
    deps = depends_on(services[name])
    assert deps.get("topic-init", {}).get("condition") == "service_completed_successfully"


@pytest.mark.parametrize("name", sorted(USES_OBJECT_STORE))
def test_object_store_users_wait_for_their_minio_user(
    services: dict[str, dict[str, Any]], name: str,
) -> None:
    assert depends_on(services[name]).get("minio-users", {}).get("condition") == (
        "service_completed_successfully")


@pytest.mark.parametrize("name", sorted(PROJECT_SERVICES))
def test_pipeline_environment(services: dict[str, dict[str, Any]], name: str) -> None:
    env = environment(services[name])
    assert env.get("WEBGYM_KAFKA__BOOTSTRAP_SERVERS", "").split(":")[0] == "broker"
    # Task URLs' {sandbox} is the sandbox service.
    assert env.get("WEBGYM_INFRA__SANDBOX_HOST") == "sandbox"
    # Events are Avro single-object encoded; no process talks to a schema registry.
    assert "WEBGYM_KAFKA__SCHEMA_REGISTRY_URL" not in env
    assert env.get("WEBGYM_S3__ENDPOINT") == "minio:9000"
    assert env.get("WEBGYM_S3__BUCKET") == "webgym"
    assert "http://vllm:8000/v1" in env.get("WEBGYM_POLICY__BASE_URL", "")
    # Each service's own credentials: test_compose.py.


@pytest.mark.parametrize("name", sorted(USES_MODEL_SERVER))
def test_the_model_servers_callers_send_its_key(
    services: dict[str, dict[str, Any]], name: str,
) -> None:
    env = environment(services[name])
    vllm_key = environment(services["vllm"])["VLLM_API_KEY"]
    assert env.get("WEBGYM_POLICY__API_KEY") == vllm_key
    assert env.get("WEBGYM_EVALUATOR__API_KEY") == vllm_key


def test_vllm_is_gpu_only(services: dict[str, dict[str, Any]]) -> None:
    svc = services["vllm"]
    assert "gpu" in (svc.get("profiles") or [])
    devices = svc["deploy"]["resources"]["reservations"]["devices"]
    assert any(
        d.get("driver") == "nvidia" and "gpu" in (d.get("capabilities") or []) for d in devices
    )
    # Nothing outside the profile may hard-require it, or a GPU-less
    # `docker compose up` would refuse to start.
    for name, other in services.items():
        if "gpu" in (other.get("profiles") or []):
            continue
        spec = depends_on(other).get("vllm")
        assert spec is None or spec.get("required") is False, name


def test_vllm_serves_lora_policy(services: dict[str, dict[str, Any]]) -> None:
    svc = services["vllm"]
    argv = as_argv(svc.get("command"))
    assert "--enable-lora" in argv
    assert argv[argv.index("--served-model-name") + 1] == "webgym-policy"
    assert "--model" in argv
    assert environment(svc).get("VLLM_ALLOW_RUNTIME_LORA_UPDATING") == "True"


def test_vllm_requires_an_api_key(services: dict[str, dict[str, Any]]) -> None:
    # vLLM reads its --api-key from VLLM_API_KEY; runtime LoRA loading is under /v1, so guarded.
    key = environment(services["vllm"]).get("VLLM_API_KEY", "")
    assert re.fullmatch(r"\$\{VLLM_API_KEY:\?[^}]+\}", key), key
    # Not on the command line, which `ps` shows to every user of the host.
    assert not any("api-key" in a or "VLLM_API_KEY" in a
                   for a in as_argv(services["vllm"].get("command")))




def test_checkpoints_mount_at_the_same_path_as_in_vllm(
    services: dict[str, dict[str, Any]],
) -> None:
    vllm = volume_mounts(services["vllm"])
    assert "checkpoints" in vllm
    # Checkpoint paths published by a writer (the trainer, once it has a
    # service) must resolve inside vLLM.
    for name, svc in services.items():
        mounts = volume_mounts(svc)
        if "checkpoints" in mounts:
            assert mounts["checkpoints"] == vllm["checkpoints"], name


def test_the_trainer_is_the_project_image_plus_llamafactory_on_a_gpu(
    services: dict[str, dict[str, Any]],
) -> None:
    svc = services["trainer"]
    assert svc["build"] == {"context": ".", "target": "trainer"}
    assert svc.get("profiles") == ["gpu"]
    assert environment(svc).get("WEBGYM_TRAINER__USE_CPU") == "false"
    devices = svc["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    stages = [args for kw, args in dockerfile_instructions() if kw == "FROM"]
    assert "pipeline AS trainer" in stages
    runs = [args for kw, args in dockerfile_instructions() if kw == "RUN"]
    # Only LLaMA-Factory's venv: the image runs no broker and has no Maven or Go to build one.
    assert any(run.endswith("&& webgym infra prepare --no-stack --with-trainer") for run in runs)


def test_the_model_loader_fetches_adapters_where_vllm_reads_them(
    services: dict[str, dict[str, Any]],
) -> None:
    loader = services["model-loader"]
    mount = volume_mounts(loader)["checkpoints"]
    assert mount == volume_mounts(services["vllm"])["checkpoints"]
    assert environment(loader)["WEBGYM_INFRA__DATA_DIR"] == mount
    assert depends_on(loader)["vllm"] == {"condition": "service_healthy", "required": False}
