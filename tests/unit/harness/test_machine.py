"""The benches' CPU accounting: which process is which, and what counts as overhead."""

from __future__ import annotations

from harness.machine import (
    PIPELINE_KINDS,
    cpu_seconds,
    cpu_used_since,
    kind_of,
    pipeline_overhead,
)

VENV = "/work/main/.venv"
# Command lines as a rollout bench's processes show them in /proc.
SEEN = {
    f"{VENV}/lib/python3.11/site-packages/playwright/driver/node "
    f"{VENV}/lib/python3.11/site-packages/playwright/driver/package/cli.js run-driver":
        "playwright driver",
    "/usr/lib/chromium/chromium-headless-shell --type=zygote --headless": "chromium",
    "/usr/bin/java -Xmx512m -Xms512m -XX:+UseG1GC -cp /x/libs/* kafka.Kafka /x/server.properties":
        "kafka",
    "/root/.cache/webgym/minio/v0/minio server /data --address 127.0.0.1:9000": "minio",
    f"{VENV}/bin/python -m environments --host 127.0.0.1 --port 18765": "web sites",
    f"{VENV}/bin/python -m webgym_cli -v worker browser": "browser worker",
    f"{VENV}/bin/python -m webgym_cli -v worker policy": "policy",
    f"{VENV}/bin/python -m webgym_cli -v worker evaluator": "evaluator",
    f"{VENV}/bin/python -m webgym_cli -v worker replay": "other workers",
    "/process_api --firecracker-init --addr 0.0.0.0:2024": "other",
}


def test_each_process_of_a_rollout_is_told_apart() -> None:
    assert {cmd: kind_of(cmd) for cmd in SEEN} == SEEN


def test_the_environment_and_the_rest_of_the_machine_are_not_overhead() -> None:
    reading = {"chromium": 10.0, "web sites": 1.0, "other": 3.0, "vllm": 50.0,
               "kafka": 2.0, "playwright driver": 1.5, "controller": 0.5}
    assert pipeline_overhead(reading) == 4.0
    assert {"chromium", "web sites", "vllm", "other"}.isdisjoint(PIPELINE_KINDS)


def test_this_process_is_counted_under_the_kind_it_is_given() -> None:
    before = cpu_seconds(own="controller")
    sum(i * i for i in range(2_000_000))  # some CPU of our own
    used = cpu_used_since(before, own="controller")
    assert used["controller"] > 0
    assert "controller" not in cpu_seconds()  # by default this process is "other"
