"""Policy benchmark: the policy processor against the local vLLM vs the same server called directly.

  .venv/bin/python -m bench.policy_throughput [--steps 4]

Starts the embedded stack with vLLM (CPU, SmolLM2-135M) if needed. For 1, 8 and 16
episodes in flight, synthetic episodes (a shop-like element list, no browser) send
each observation through Kafka and wait for the policy processor's action; then the
same prompts go straight to vLLM at the same concurrency. Bus overhead per step =
(observation published -> action received) - the model time the processor measured.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import cast

import typer
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from rich.console import Console
from rich.table import Table

from harness.launch import PipelineProcess
from harness.machine import describe_machine
from infra import stack
from webgym_common.agent.actions import reply_regex
from webgym_common.agent.prompts import EpisodeContext, build_messages
from webgym_common.config import Settings, get_settings
from webgym_common.events import (
    ActionChosen,
    EpisodeRequested,
    Mark,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.topics import Topic

console = Console()
NAMES = ["Search products", "Phones", "Laptops", "Cameras", "Monitors", "Audio", "Cart",
         "Cobalt Pulse 311", "Acme Lumen 964", "Cobalt Atlas 320", "Price: low to high",
         "Brand", "Next page", "Sign in", "Help", "Deals", "Contact", "About", "Careers", "Blog"]
MARKS = [Mark(index=i + 1, ref=f"e{i + 1}", role="searchbox" if i == 0 else "link", name=n,
              x=10, y=20 * i, width=100, height=18) for i, n in enumerate(NAMES)]
TASK = "What is the price of the Cobalt Pulse 311 phone on Gadget Depot?"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def observation(episode_id: str, step: int) -> StepObserved:
    return StepObserved(episode_id=episode_id, task_id="bench", step=step,
                        url="http://127.0.0.1/shop/", title="Gadget Depot",
                        viewport=Viewport(width=1280, height=720), marks=MARKS)


async def via_pipeline(base: Settings, inflight: int, steps: int) -> dict[str, float]:
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    settings = base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"topic_prefix": prefix}),
        "policy": base.policy.model_copy(update={"max_inflight": inflight}),
    })
    await create_topics(settings)
    log = Path(tempfile.mkdtemp(prefix="bench-policy-")) / "policy.log"
    proc = PipelineProcess(settings, ["worker", "policy", "--kind", "vllm"], log)
    total, overhead, tokens = [], [], 0
    try:
        async with EventProducer(settings, client_id="bench") as producer:
            reader = EventConsumer(settings, [Topic.ACTIONS], None, producer, client_id="bench")
            await reader.start(from_end=True)
            waiting: dict[tuple[str, int], asyncio.Future] = {}

            async def route() -> None:
                async for r in reader.events(poll_timeout_ms=50):
                    if not isinstance(r.event, ActionChosen):
                        continue
                    fut = waiting.pop((r.event.episode_id, r.event.step), None)
                    if fut is not None and not fut.done():
                        fut.set_result(r.event)

            router = asyncio.create_task(route())

            async def episode(i: int) -> None:
                nonlocal tokens
                eid = f"bench-{i}-{uuid.uuid4().hex[:6]}"
                await producer.publish(Topic.EPISODES, eid, EpisodeRequested(
                    episode_id=eid, iteration=0, split="test", max_steps=steps + 5,
                    deadline=utc_now() + timedelta(minutes=30), policy_version="bench",
                    task=Task(task_id="bench", task_name=TASK, domain="bench",
                              website="http://127.0.0.1/shop/", difficulty=1)))
                for step in range(steps):
                    fut = asyncio.get_running_loop().create_future()
                    waiting[(eid, step)] = fut
                    started = time.perf_counter()
                    await producer.publish(Topic.OBSERVATIONS, eid, observation(eid, step))
                    action: ActionChosen = await asyncio.wait_for(fut, 600)
                    elapsed = (time.perf_counter() - started) * 1000
                    total.append(elapsed)
                    overhead.append(elapsed - action.latency_ms)
                    tokens += action.completion_tokens

            await episode(-1)  # warm-up: group join, table recovery, first compile
            total.clear()
            overhead.clear()
            tokens = 0
            started = time.perf_counter()
            await asyncio.gather(*[episode(i) for i in range(inflight)])
            wall = time.perf_counter() - started
            router.cancel()
            await reader.stop()
    finally:
        proc.stop()
    return {"actions/s": len(total) / wall, "tokens/s": tokens / wall,
            "overhead p50": statistics.median(overhead), "overhead p99": pct(overhead, 0.99)}


async def direct(settings: Settings, inflight: int, steps: int) -> dict[str, float]:
    cfg = settings.policy
    client = AsyncOpenAI(base_url=cfg.base_url, api_key=cfg.api_key, timeout=cfg.timeout_s)
    ctx = EpisodeContext(episode_id="d", task_id="bench", task_name=TASK, max_steps=steps + 5)
    messages = cast(list[ChatCompletionMessageParam],
                    build_messages(ctx, "http://127.0.0.1/shop/", MARKS))
    tokens = 0
    sem = asyncio.Semaphore(inflight)

    async def call() -> None:
        nonlocal tokens
        async with sem:
            resp = await client.chat.completions.create(
                model=cfg.model, messages=messages, max_tokens=cfg.max_tokens,
                temperature=cfg.temperature,
                extra_body={"structured_outputs": {"regex": reply_regex("set_of_marks")}})
            if resp.usage is None:
                raise RuntimeError("the model server's reply carries no token usage")
            tokens += resp.usage.completion_tokens

    started = time.perf_counter()
    await asyncio.gather(*[call() for _ in range(inflight * steps)])
    wall = time.perf_counter() - started
    return {"actions/s": inflight * steps / wall, "tokens/s": tokens / wall}


def main(steps: int = 4) -> None:
    console.print(describe_machine())
    settings = get_settings()
    asyncio.run(stack.up(settings, with_vllm=True))
    table = Table(title=f"policy throughput (SmolLM2-135M on vLLM CPU, {steps} steps/episode)")
    for col in ("in flight", "pipeline actions/s", "tokens/s", "direct actions/s", "tokens/s",
                "pipeline / direct", "bus overhead p50 ms", "p99 ms"):
        table.add_column(col, justify="right")
    for inflight in (1, 8, 16):
        console.print(f"{inflight} in flight ...")
        p = asyncio.run(via_pipeline(settings, inflight, steps))
        d = asyncio.run(direct(settings, inflight, steps))
        table.add_row(str(inflight), f"{p['actions/s']:.2f}", f"{p['tokens/s']:.0f}",
                      f"{d['actions/s']:.2f}", f"{d['tokens/s']:.0f}",
                      f"{p['tokens/s'] / d['tokens/s']:.2f}", f"{p['overhead p50']:.0f}",
                      f"{p['overhead p99']:.0f}")
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
