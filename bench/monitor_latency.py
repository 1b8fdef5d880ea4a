"""Monitor benchmark: event → page latency while an iteration runs, measured in the browser.

  .venv/bin/python -m bench.monitor_latency [--tasks 32] [--contexts 4] [--delay 0.5]

The embedded stack, the pipeline (browser worker, teacher-forcing policy with a model-like
delay per decision, evaluator, history, metrics, replay) and `webgym monitor` run as
processes; headless Chromium holds the live page open while one iteration of sandbox tasks
runs. For every grid row the page updates, its script records `Date.now()` minus the Kafka
timestamp of the event that changed it (the producer's clock at publication; one machine,
one clock): publication → consumed by the monitor → folded → server-sent event → row in the
DOM. Prints p50 / p99 overall and per event type, and the machine's load.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

import typer
from playwright.async_api import async_playwright
from rich.console import Console
from rich.table import Table

from harness.machine import describe_machine
from infra import pipeline, stack
from infra.procs import free_port
from producers.catalog import load_tasks
from producers.controller.rollout import run_iteration
from webgym_common.choices import PolicyKind, SamplingStrategy
from webgym_common.chromium import launch_options
from webgym_common.config import Settings, get_settings, load_settings, settings_env
from webgym_common.lifecycle import READY_FILE_ENV
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer

console = Console()
TASKS_FILE = Path("environments/tasks/sandbox_tasks.jsonl")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_monitor(settings: Settings, data: Path) -> tuple[subprocess.Popen[bytes], Path]:
    ready = data / "monitor.ready"
    log = (data / "monitor.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "webgym_cli", "-v", "monitor"],
                            env={**os.environ, **settings_env(settings),
                                 READY_FILE_ENV: str(ready)},
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, ready


async def measure(base: Settings, tasks: int, contexts: int, delay_s: float
                  ) -> tuple[list[dict], float, int]:
    data = Path(tempfile.mkdtemp(prefix="bench-monitor-"))
    settings = base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"topic_prefix": f"bench{uuid.uuid4().hex[:6]}"}),
        "browser": base.browser.model_copy(update={"contexts": contexts}),
        "policy": base.policy.model_copy(update={
            "kind": PolicyKind.TEACHER, "teacher_delay_s": delay_s,
            "teacher_delay_jitter_s": delay_s}),
        "rollout": base.rollout.model_copy(update={
            "strategy": SamplingStrategy.UNIFORM, "seed": 1, "completion_threshold": 1.0}),
        "infra": base.infra.model_copy(update={"data_dir": data}),
        "monitor": base.monitor.model_copy(update={"port": free_port(),
                                                   "tensorboard_dir": data / "tb"}),
    })
    await create_topics(settings)
    monitor, ready = start_monitor(settings, data)
    try:
        await pipeline.up(settings)
        async with asyncio.timeout(60):
            while not ready.exists():  # noqa: ASYNC110 (the process's ready file)
                await asyncio.sleep(0.2)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(**launch_options(settings.browser),
                                               args=["--disable-gpu"])
            page = await browser.new_page()
            await page.goto(f"http://{settings.monitor.host}:{settings.monitor.port}/")
            async with EventProducer(settings, client_id="bench") as producer:
                await load_tasks(TASKS_FILE, producer)
                started = time.perf_counter()
                # The page reloads once, on the iteration's start; it measures from then on.
                _, closed = await run_iteration(settings, producer, 0, "train", tasks)
                wall = time.perf_counter() - started
            await asyncio.sleep(2)  # the last scores' rows
            samples = await page.evaluate("() => window.__monitorLatencies")
            await browser.close()
        return samples, wall, closed.completed
    finally:
        monitor.terminate()
        monitor.wait(30)
        pipeline.down(settings)


def private_stack() -> Settings:
    """A stack of its own (free ports, a temporary data dir): no one else's is disturbed."""
    base = get_settings()
    return load_settings(infra={
        "home": base.infra.home, "data_dir": tempfile.mkdtemp(prefix="bench-monitor-stack-"),
        "kafka_port": free_port(), "kafka_controller_port": free_port(),
        "minio_port": free_port(), "minio_console_port": free_port(),
        "sandbox_port": free_port()})


def main(tasks: int = 32, contexts: int = 4, delay: float = 0.5) -> None:
    console.print(describe_machine())
    settings = private_stack()
    asyncio.run(stack.up(settings))
    try:
        load_before = os.getloadavg()
        samples, wall, completed = asyncio.run(measure(settings, tasks, contexts, delay))
        load_after = os.getloadavg()
    finally:
        stack.down(settings)
    by_cause: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        by_cause[s["cause"]].append(s["ms"])
    table = Table(title=f"event → DOM latency in the live page, one iteration of {tasks} tasks "
                  f"({completed} completed in {wall:.0f} s), {contexts} contexts, teacher "
                  f"policy {delay:.1f}–{2 * delay:.1f} s a decision")
    for col in ("events", "count", "p50 ms", "p99 ms", "max ms"):
        table.add_column(col, justify="right")
    every = [s["ms"] for s in samples]
    for name, values in [("all", every), *sorted(by_cause.items())]:
        table.add_row(name, str(len(values)), f"{statistics.median(values):.0f}",
                      f"{pct(values, 0.99):.0f}", f"{max(values):.0f}")
    console.print(table)
    console.print(f"machine load (1-min avg) {load_before[0]:.2f} -> {load_after[0]:.2f} on "
                  f"{os.cpu_count()} cores")


if __name__ == "__main__":
    typer.run(main)
