"""Browser-worker benchmark: steps/s and step latency through Kafka vs a direct Playwright loop.

  .venv/bin/python -m bench.browser_steps [--steps-per-episode 15]

For 1, 4, 8 and 16 contexts in one worker, and 2 workers x 4 contexts, as many
episodes as contexts run on the sandbox playground. A bench policy answers every
observation at once with the next action of a fixed cycle (click, scroll down,
scroll up, follow a link, go back). Step latency = ActionChosen published ->
next StepObserved received. The direct loop does the same steps with the
worker's own execute/observe code on the same number of pages in one process,
with no Kafka and no MinIO; the ratio shows what the pipeline costs.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench.direct import open_observed_page
from harness.hand_fed import HandFedEpisode
from harness.launch import BrowserWorkerProcess
from harness.machine import describe_machine
from infra import stack
from producers.browser.browser_pool import BrowserPool
from producers.browser.execute import execute
from producers.browser.observe import observe
from webgym_common.agent.actions import format_action
from webgym_common.agent.teacher import resolve_reference_action
from webgym_common.config import Settings, get_settings
from webgym_common.events import ActionChosen, ReferenceAction
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer
from webgym_common.topics import Topic

console = Console()
CYCLE = [
    ReferenceAction(action="Click", role="button", name="Press me"),
    ReferenceAction(action="Scroll", direction="down"),
    ReferenceAction(action="Scroll", direction="up"),
    ReferenceAction(action="Click", role="link", name="Next page"),
    ReferenceAction(action="GoBack"),
]
CONFIGS = [(1, 1), (1, 4), (1, 8), (1, 16), (2, 4)]  # (workers, contexts per worker)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_episode_via_kafka(settings: Settings, producer: EventProducer, url: str,
                                steps: int, latencies: list[float], progress, bar) -> None:
    async with HandFedEpisode(settings, producer, url, max_steps=steps + 5,
                              timeout_s=600) as ep:
        obs = await ep.start(wait_s=300)
        for i in range(steps):
            action = resolve_reference_action(CYCLE[i % len(CYCLE)], obs.marks)
            started = time.perf_counter()
            await producer.publish(Topic.ACTIONS, ep.episode_id, ActionChosen(
                episode_id=ep.episode_id, step=obs.step, action=action,
                action_string=format_action(action), policy_version="bench"))
            obs = await ep.observation(obs.step + 1, wait_s=120)
            if obs.error:
                raise RuntimeError(f"bench step failed: {obs.error}")
            latencies.append((time.perf_counter() - started) * 1000)
            progress.advance(bar)
        await ep.send_only("ANSWER [done]")
        await ep.completed(wait_s=60)


async def pipeline(base: Settings, workers: int, contexts: int, steps: int,
                   progress) -> tuple[float, list[float]]:
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    settings = base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"topic_prefix": prefix}),  # and the groups
    })
    await create_topics(settings)
    logs = Path(tempfile.mkdtemp(prefix="bench-browser-"))
    procs = [BrowserWorkerProcess(settings, contexts, logs / f"w{i}.log") for i in range(workers)]
    try:
        async with asyncio.timeout(120):
            while not all(p.owns_partitions() for p in procs):  # noqa: ASYNC110 (ready files)
                await asyncio.sleep(0.2)
        episodes = workers * contexts
        bar = progress.add_task(f"kafka  {workers}x{contexts}", total=episodes * steps)
        latencies: list[float] = []
        url = f"{settings.sandbox_url}/playground/"
        async with EventProducer(settings, client_id="bench") as producer:
            started = time.perf_counter()
            await asyncio.gather(*[
                run_episode_via_kafka(settings, producer, url, steps, latencies, progress, bar)
                for _ in range(episodes)
            ])
            elapsed = time.perf_counter() - started
        return len(latencies) / elapsed, latencies
    finally:
        for p in procs:
            p.stop()


async def direct(settings: Settings, pages: int, steps: int, progress) -> tuple[float, list[float]]:
    cfg = settings.browser
    pool = BrowserPool(cfg, lambda reason: None)
    await pool.start()
    bar = progress.add_task(f"direct {pages} pages", total=pages * steps)
    latencies: list[float] = []

    async def one() -> None:
        session, context, obs = await open_observed_page(
            pool, cfg, f"{settings.sandbox_url}/playground/")
        for i in range(steps):
            session.marks = {m.index: m for m in obs.marks}
            started = time.perf_counter()
            await execute(session, resolve_reference_action(CYCLE[i % len(CYCLE)], obs.marks),
                          cfg)
            obs = await observe(*session.attached, cfg)
            latencies.append((time.perf_counter() - started) * 1000)
            progress.advance(bar)
        await context.close()

    try:
        started = time.perf_counter()
        await asyncio.gather(*[one() for _ in range(pages)])
        return len(latencies) / (time.perf_counter() - started), latencies
    finally:
        await pool.stop()


def main(steps_per_episode: int = 15) -> None:
    console.print(describe_machine())
    settings = get_settings()
    asyncio.run(stack.up(settings))
    fmt = settings.browser.screenshot_format
    table = Table(title=f"browser steps ({steps_per_episode} steps per episode, "
                        f"{os.cpu_count()} cores, screenshots {fmt})")
    for col in ("setup", "kafka steps/s", "p50 ms", "p99 ms", "direct steps/s", "p50 ms",
                "p99 ms", "kafka / direct"):
        table.add_column(col, justify="right")
    load_before = os.getloadavg()[0]
    with Progress(console=console) as progress:
        for workers, contexts in CONFIGS:
            k_rate, k_lat = asyncio.run(
                pipeline(settings, workers, contexts, steps_per_episode, progress))
            d_rate, d_lat = asyncio.run(
                direct(settings, workers * contexts, steps_per_episode, progress))
            table.add_row(
                f"{workers} worker{'s' if workers > 1 else ''} x {contexts} contexts",
                f"{k_rate:.1f}", f"{statistics.median(k_lat):.0f}", f"{pct(k_lat, 0.99):.0f}",
                f"{d_rate:.1f}", f"{statistics.median(d_lat):.0f}", f"{pct(d_lat, 0.99):.0f}",
                f"{k_rate / d_rate:.2f}",
            )
    console.print(table)
    console.print(f"load average (1 min): {load_before:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    typer.run(main)
