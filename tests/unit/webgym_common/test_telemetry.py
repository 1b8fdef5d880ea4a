"""Nothing phones home: every launcher's environment carries NO_TELEMETRY (real child
processes report what they were given), and so do the Dockerfile's stages and every
docker-compose service that runs our image, vLLM or MinIO."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml

from consumers.trainer.run import train_env
from infra import supervisor
from infra.procs import ManagedProcess, run_step
from infra.vllm_server import server_env
from tests.support.compose_files import dockerfile_instructions, environment
from webgym_common.config import TrainerSettings, load_settings
from webgym_common.telemetry import NO_TELEMETRY, without_telemetry

ROOT = Path(__file__).resolve().parents[3]
PRINT_ENV = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]
# The caller's own environment says otherwise: the launchers' word is last.
REPORTING = {"DO_NOT_TRACK": "0", "WANDB_MODE": "online", "VLLM_NO_USAGE_STATS": "0",
             "HF_HUB_DISABLE_TELEMETRY": "0"}
# Services whose software reads none of these variables and reports nothing (Redpanda's
# own usage reporter is its cluster property enable_metrics_reporter, not a variable).
NOT_READING_ENV = {"broker", "console"}


@pytest.fixture
def reporting_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in REPORTING.items():
        monkeypatch.setenv(name, value)


def carries_no_telemetry(env: dict[str, str]) -> bool:
    return {k: env.get(k) for k in NO_TELEMETRY} == dict(NO_TELEMETRY)


def test_the_table_stops_each_known_reporter() -> None:
    assert NO_TELEMETRY["VLLM_NO_USAGE_STATS"] == "1" and NO_TELEMETRY["DO_NOT_TRACK"] == "1"
    assert NO_TELEMETRY["HF_HUB_DISABLE_TELEMETRY"] == "1"
    assert NO_TELEMETRY["RAY_USAGE_STATS_ENABLED"] == "0"
    assert NO_TELEMETRY["WANDB_MODE"] == "offline"
    assert NO_TELEMETRY["MINIO_UPDATE"] == "off"
    assert without_telemetry({"A": "1", **REPORTING}) == {"A": "1", **NO_TELEMETRY}


@pytest.mark.usefixtures("reporting_environment")
def test_vllm_and_the_trainers_llamafactory_run_without_telemetry(tmp_path: Path) -> None:
    assert carries_no_telemetry(server_env(load_settings()))
    env = train_env(TrainerSettings(), tmp_path)
    assert carries_no_telemetry(env) and env["HF_HUB_OFFLINE"] == "1"


@pytest.mark.usefixtures("reporting_environment")
def test_every_process_the_stack_starts_gets_it_whatever_its_own_env_says(
        tmp_path: Path) -> None:
    """Kafka, MinIO, vLLM and the sandbox start as ManagedProcess; set-up steps (pip) as
    run_step: real children print the environment they got."""
    proc = ManagedProcess("env-probe", tmp_path)
    proc.start(PRINT_ENV, env={"DO_NOT_TRACK": "0", "MINE": "1"})
    deadline = time.monotonic() + 30
    while not proc.log_file.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = json.loads(proc.log_file.read_text())
    assert carries_no_telemetry(started) and started["MINE"] == "1"
    assert carries_no_telemetry(json.loads(run_step(PRINT_ENV, "printing the environment")))


@pytest.mark.usefixtures("reporting_environment")
def test_the_supervisors_pipeline_processes_get_it(tmp_path: Path) -> None:
    child = supervisor.Child("probe", PRINT_ENV, tmp_path / "probe.pid", tmp_path / "probe.log",
                             tmp_path / "probe.ready")
    supervisor._spawn(child)
    assert child.popen is not None and child.popen.wait(30) == 0
    assert carries_no_telemetry(json.loads(child.log_file.read_text()))


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_defines_the_same_table_and_every_service_that_reads_it_merges_it() -> None:
    data = compose()
    assert {k: str(v) for k, v in data["x-no-telemetry"].items()} == dict(NO_TELEMETRY)
    services = data["services"]
    assert NOT_READING_ENV < set(services)
    for name, service in services.items():
        if name not in NOT_READING_ENV:
            assert carries_no_telemetry(environment(service)), name


def test_every_dockerfile_stage_sets_it() -> None:
    stages: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for keyword, args in dockerfile_instructions():
        if keyword == "FROM":
            base, _, name = args.partition(" AS ")
            current = dict(stages.get(base.strip(), {}))
            stages[name.strip()] = current
        elif keyword == "ENV":
            current.update(pair.split("=", 1) for pair in args.split())
    assert {"pipeline", "trainer", "vllm-cpu"} <= set(stages)
    for name, env in stages.items():
        assert carries_no_telemetry(env), name
