"""docker compose for real: the images built here, the stack up, an iteration through the
containers, a browser scale-up and two container kills, outcomes counted from the topics;
and an iteration whose broker container is SIGKILLed mid-way.

Runs with `make compose-test` (WEBGYM_COMPOSE_TEST=1; needs a Docker engine with compose v2:
infra/docker/engine.sh installs one on Debian). docker-compose.yml plus
docker-compose.local.yml (Kafka, MinIO and vLLM built here) plus a test file that moves
every published port to a free one, publishes the sandbox (to count its form posts) and
runs the policy teacher-forced. With WEBGYM_COMPOSE_REGISTRY=1 (a registry reachable;
with WEBGYM_COMPOSE_VLLM=0 unless the host has a GPU) docker-compose.local.yml is left
out: the broker is the main file's Redpanda and MinIO its registry image, so the broker
kill checks Redpanda's own durability settings. The verdict uses the chaos suite's rules
(harness/outcomes.py): per requested episode, one completion and one score, side
effects once, history and replay samples exact, no dead letters.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from environments.app import TASKS_FILE
from harness.outcomes import markdown, tally
from harness.topic_reads import read_topic
from infra import minio_users
from infra.minio_users import password_variable
from infra.procs import free_port
from infra.vllm_server import ensure_model
from producers.catalog import run_tasks_load
from tests.chaos.observe import observe
from tests.chaos.scenario import CHAOS_TASKS, Options, chaos_settings
from tests.support.compose import ROOT, Compose, engine_problem
from webgym_common.config import Settings, get_settings, settings_env
from webgym_common.topics import Topic

pytestmark = [pytest.mark.compose, pytest.mark.timeout(3600)]

# WEBGYM_COMPOSE_VLLM=0 leaves the CPU vLLM image and service out (CI's time budget): the
# iteration is teacher-forced and needs no model.
WITH_VLLM = os.environ.get("WEBGYM_COMPOSE_VLLM", "1") != "0"
# WEBGYM_COMPOSE_REGISTRY=1: Redpanda's and MinIO's registry images (no local file).
REGISTRY = os.environ.get("WEBGYM_COMPOSE_REGISTRY") == "1"
EPISODES = 48
# An iteration takes ~90 s here; one that has not ended in 10 min is stuck.
CONTROLLER_WAIT_S = 600
CONTEXTS = 4  # per browser container: 3 containers after the scale-up hold 12 in flight
STACK = ["broker", "minio", "minio-users", "topic-init", "sandbox", "browser", "policy",
         "evaluator", "history", "metrics", "replay", *(["vllm"] if WITH_VLLM else [])]
WEBGYM_SERVICES = ["topic-init", "sandbox", "browser", "policy", "evaluator", "history",
                   "metrics", "replay", "controller"]
# The settings the chaos suite runs its pipeline with (teacher policy, short waits, a
# controller that never cancels a straggler), for every project container.
TUNED_SECTIONS = ("WEBGYM_BROWSER__", "WEBGYM_POLICY__KIND", "WEBGYM_POLICY__TEACHER",
                  "WEBGYM_ROLLOUT__")


def say(*lines: str) -> None:
    print(*lines, sep="\n", file=sys.stderr, flush=True)


def host_settings(ports: dict[str, int]) -> Settings:
    """The test's own view of the stack: the broker and the sandbox as published here."""
    base = get_settings()
    kafka = base.kafka.model_copy(update={"bootstrap_servers": f"localhost:{ports['broker']}"})
    infra = base.infra.model_copy(update={"sandbox_port": ports["sandbox"],
                                          "host": "127.0.0.1", "sandbox_host": None})
    return base.model_copy(update={"kafka": kafka, "infra": infra})


# The image's own settings, never the host's: Chromium's sandbox is off in a container
# (Docker's seccomp profile forbids its user namespaces; the Dockerfile says so).
IMAGE_SETTINGS = ("WEBGYM_BROWSER__SANDBOX", "WEBGYM_BROWSER__SANDBOX_USER")


def compose_test_file(tuned: dict[str, str], ports: dict[str, int]) -> dict:
    env = {k: v for k, v in tuned.items()
           if k.startswith(TUNED_SECTIONS) and k not in IMAGE_SETTINGS}
    env["WEBGYM_BROWSER__CONTEXTS"] = str(CONTEXTS)
    services: dict[str, dict] = {name: {"environment": env} for name in WEBGYM_SERVICES}
    services["sandbox"]["ports"] = [f"127.0.0.1:{ports['sandbox']}:18765"]
    services["browser"]["command"] = ["webgym", "worker", "browser", "--contexts",
                                      str(CONTEXTS)]
    return {"services": services}


@pytest.fixture(scope="module")
def images() -> None:
    if problem := engine_problem():
        pytest.fail(f"no usable Docker engine ({problem}): bash infra/docker/engine.sh")
    base = os.environ.get("WEBGYM_COMPOSE_BASE", "debootstrap")
    started = time.monotonic()
    only = (["--only", "webgym-stream:latest"] if REGISTRY
            else [] if WITH_VLLM
            else ["--only", "webgym-stream:latest", "webgym-kafka:local", "webgym-minio:local"])
    subprocess.run([sys.executable, "-m", "infra.images", "--base", base, *only], cwd=ROOT,
                   check=True, timeout=3000)
    say(f"images built in {time.monotonic() - started:.0f} s")


@pytest.fixture
def stack(images: None, tmp_path: Path) -> Iterator[tuple[Compose, dict[str, int]]]:
    ports = {name: free_port() for name in
             ("broker", "minio", "minio_console", "monitor", "envserver", "sandbox")}
    env_file = tmp_path / ".env"
    env_file.write_text("\n".join([
        "MINIO_ROOT_USER=webgym", f"MINIO_ROOT_PASSWORD={secrets.token_hex(16)}",
        f"VLLM_API_KEY={secrets.token_hex(16)}",
        # Each object-store service's own MinIO user (infra/minio_users.py).
        *(f"{password_variable(s)}={secrets.token_hex(16)}" for s in minio_users.ACCESS),
        f"WEBGYM_MODEL_DIR={ensure_model(get_settings()) if WITH_VLLM else tmp_path}",
        f"WEBGYM_BROKER_PORT={ports['broker']}", f"WEBGYM_MINIO_PORT={ports['minio']}",
        f"WEBGYM_MINIO_CONSOLE_PORT={ports['minio_console']}",
        f"WEBGYM_MONITOR_PORT={ports['monitor']}", f"WEBGYM_ENVSERVER_PORT={ports['envserver']}",
        "",
    ]))
    tuned = settings_env(chaos_settings(get_settings(), Options(episodes=EPISODES)))
    override = tmp_path / "compose.test.yml"
    override.write_text(yaml.safe_dump(compose_test_file(tuned, ports)))
    local = [] if REGISTRY else [ROOT / "docker-compose.local.yml"]
    compose = Compose(f"webgym-ct-{secrets.token_hex(3)}",
                      [ROOT / "docker-compose.yml", *local, override],
                      env_file, profiles=["gpu"] if WITH_VLLM else [])
    try:
        yield compose, ports
    finally:
        compose.down()
        left = compose.leftovers()
        say(*compose.log)
        assert not any(left.values()), f"left behind: {left}"


async def scored(settings: Settings) -> int:
    return len(await read_topic(settings, Topic.EPISODES_SCORED))


def wait_scored(settings: Settings, at_least: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    n = 0
    while time.monotonic() < deadline:
        n = asyncio.run(scored(settings))
        if n >= at_least:
            return n
        time.sleep(2)
    return n


def ask_the_model(compose: Compose) -> str:
    """One chat completion from the CPU vLLM container, asked from inside the network."""
    script = (
        "import os, httpx; r = httpx.post('http://vllm:8000/v1/chat/completions', timeout=120,"
        " headers={'Authorization': 'Bearer ' + os.environ['WEBGYM_POLICY__API_KEY']},"
        " json={'model': 'webgym-policy', 'max_tokens': 8,"
        " 'messages': [{'role': 'user', 'content': 'Say hello.'}]});"
        " r.raise_for_status(); print(r.json()['choices'][0]['message']['content'])")
    return compose.run("exec", "-T", "policy", "python", "-c", script, timeout_s=180)


def load_chaos_tasks(settings: Settings, tmp_path: Path) -> None:
    """The chaos suite's tasks (each posts forms, so doubled side effects would show)."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(line + "\n" for line in TASKS_FILE.read_text().splitlines()
                             if json.loads(line)["task_id"] in CHAOS_TASKS))
    report = asyncio.run(run_tasks_load(settings, tasks, Console(stderr=True)))
    assert report.loaded == len(CHAOS_TASKS)


def start_iteration(compose: Compose) -> str:
    """One training iteration of EPISODES episodes; the controller container's id."""
    return compose.run(
        "run", "-d", "--no-deps", "controller", "webgym", "rollout", "--split", "train",
        "--tasks-per-iteration", str(EPISODES), "--iterations", "1").strip().splitlines()[-1]


def verdict(compose: Compose, settings: Settings, controller: str, scenario: str,
            started: float) -> None:
    """Wait for the controller, count the outcomes from the topics, assert them. A controller
    still waiting after CONTROLLER_WAIT_S is a failure that shows which episodes it waits
    for and what every process said last, not a bare timeout."""
    try:
        exit_code = subprocess.run(["docker", "wait", controller], capture_output=True,
                                   text=True, timeout=CONTROLLER_WAIT_S,
                                   check=True).stdout.strip()
    except subprocess.TimeoutExpired:
        exit_code = f"still running after {CONTROLLER_WAIT_S} s"  # its log tail: below
        logs = Path(os.environ.get("WEBGYM_COMPOSE_LOGS", tempfile.mkdtemp(prefix="compose-")))
        logs.mkdir(parents=True, exist_ok=True)
        for service in WEBGYM_SERVICES[1:-1]:  # the long-running ones (not topic-init, controller)
            (logs / f"{service}.log").write_text(compose.logs(service, tail=100_000))
        say(f"every service's log: {logs}")
    iteration_s = time.monotonic() - started
    time.sleep(30)  # history, metrics and replay catch up
    observed = asyncio.run(observe(settings, Options(episodes=EPISODES, replay=True), set(),
                                   ({}, {})))
    result = tally(scenario, observed)
    say(markdown([result]), f"iteration done in {iteration_s:.0f} s (controller exit "
        f"{exit_code})")
    tail = subprocess.run(["docker", "logs", "--tail", "30", controller], capture_output=True,
                          text=True, timeout=60, check=False)
    subprocess.run(["docker", "rm", "-f", controller], check=False, timeout=60)
    assert exit_code == "0", "\n".join([*result.notes, tail.stdout + tail.stderr])
    assert result.episodes == EPISODES, result.notes
    assert (result.lost, result.duplicated, result.wrong, result.dlq) == (0, 0, 0, 0), \
        "\n".join(result.notes)


def test_an_iteration_through_the_containers_survives_scaling_and_kills(
        stack: tuple[Compose, dict[str, int]], tmp_path: Path) -> None:
    compose, ports = stack
    settings = host_settings(ports)
    started = time.monotonic()
    compose.up(STACK)
    say(f"stack healthy in {time.monotonic() - started:.0f} s")
    if WITH_VLLM:
        assert ask_the_model(compose).strip(), "vLLM on the CPU answered nothing"
    load_chaos_tasks(settings, tmp_path)
    controller = start_iteration(compose)
    assert wait_scored(settings, 6, 300) >= 6, compose.logs("browser")
    compose.scale("browser", 3)
    browsers = compose.containers("browser")
    assert len(browsers) == 3
    subprocess.run(["docker", "kill", browsers[-1]], check=True, timeout=60)
    say(f"killed browser {browsers[-1][:12]} at {asyncio.run(scored(settings))} scored")
    assert wait_scored(settings, 16, 300) >= 16, compose.logs("browser")
    (policy,) = compose.containers("policy")
    subprocess.run(["docker", "kill", policy], check=True, timeout=60)
    say(f"killed policy {policy[:12]} at {asyncio.run(scored(settings))} scored")
    # `docker kill` is a manual stop, which restart policies leave alone: start them again
    # as an operator (or an orchestrator) would.
    time.sleep(5)
    subprocess.run(["docker", "start", browsers[-1], policy], check=True, timeout=120)
    verdict(compose, settings, controller, "compose: scale 1->3, kill browser + policy", started)


def test_a_broker_killed_mid_iteration_loses_no_episode(
        stack: tuple[Compose, dict[str, int]], tmp_path: Path) -> None:
    """`docker kill` (SIGKILL) of the broker container while episodes are in flight: what it
    acknowledged must already be on disk (no fsync bypass, no write caching), and what it
    did not acknowledge is sent again. It is started again after 5 s (a manual stop, which
    restart policies leave alone); every process goes on by itself, and every requested
    episode is completed and scored exactly once, counted from the topics."""
    compose, ports = stack
    settings = host_settings(ports)
    started = time.monotonic()
    compose.up(STACK)
    say(f"stack healthy in {time.monotonic() - started:.0f} s")
    load_chaos_tasks(settings, tmp_path)
    controller = start_iteration(compose)
    at = wait_scored(settings, 6, 300)
    assert at >= 6, compose.logs("browser")
    (broker,) = compose.containers("broker")
    subprocess.run(["docker", "kill", broker], check=True, timeout=60)
    say(f"killed broker {broker[:12]} at {at} scored")
    time.sleep(5)
    subprocess.run(["docker", "start", broker], check=True, timeout=120)
    compose.up(["broker"], timeout_s=300)  # the same container, until it is healthy again
    say(f"broker back at {asyncio.run(scored(settings))} scored")
    verdict(compose, settings, controller, "compose: broker SIGKILL + restart", started)
