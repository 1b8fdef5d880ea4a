"""Bus benchmark: produce -> consume latency and throughput of StepObserved-sized events.

Runs against the embedded stack (started if it is not up) on a fresh topic prefix:
  .venv/bin/python bench/bus_roundtrip.py [--latency-n 500] [--throughput-n 5000]
Prints p50/p99 latency (one event in flight), throughput (many in flight), the
codec's share of the time, and the machine's load.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import string
import time
import uuid

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from harness.machine import describe_machine
from infra import stack
from webgym_common.codec import Codec
from webgym_common.config import Settings, get_settings
from webgym_common.events import Mark, StepObserved, Viewport
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.topics import Topic

console = Console()


def step_event(episode_id: str, step: int, tree_bytes: int = 20_000) -> StepObserved:
    rnd = random.Random(step)
    lines: list[str] = []
    size = 0
    while size < tree_bytes:
        name = "".join(rnd.choices(string.ascii_letters + " ", k=rnd.randint(8, 40)))
        line = f'- link "{name}" [ref=e{len(lines)}] [box=10,{len(lines) * 20},200,18]'
        lines.append(line)
        size += len(line) + 1
    marks = [
        Mark(index=i, ref=f"e{i}", role="link", name=f"item {i}", x=10, y=i * 20, width=200,
             height=18)
        for i in range(60)
    ]
    return StepObserved(
        episode_id=episode_id, task_id="bench", step=step, url="http://127.0.0.1/bench",
        title="bench", viewport=Viewport(width=1280, height=720),
        screenshot_uri=f"s3://webgym/sha256/ab/{uuid.uuid4().hex}.jpg",
        screenshot_sha256=uuid.uuid4().hex * 2, screenshot_format="jpeg",
        accessibility_tree="\n".join(lines), marks=marks,
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(settings: Settings, n: int, progress: Progress) -> list[float]:
    out = []
    task = progress.add_task("latency (1 in flight)", total=n)
    async with EventProducer(settings, client_id="bench") as producer:
        group = f"bench-{uuid.uuid4().hex[:6]}"
        async with EventConsumer(settings, [Topic.OBSERVATIONS], group, producer) as consumer:
            events = consumer.events(poll_timeout_ms=50)
            await _warm_up(producer, events)
            for i in range(n):
                event = step_event("lat", i)
                started = time.perf_counter()
                await producer.publish(Topic.OBSERVATIONS, "lat", event)
                got = await anext(events)
                assert got.event.event_id == event.event_id
                out.append((time.perf_counter() - started) * 1000)
                progress.advance(task)
    return out


async def _warm_up(producer: EventProducer, events) -> None:
    # The first poll waits for the group join; keep it out of the numbers.
    await producer.publish(Topic.OBSERVATIONS, "lat", step_event("lat", -1))
    await anext(events)


async def throughput(settings: Settings, n: int, progress: Progress) -> tuple[float, float]:
    task = progress.add_task("throughput (all in flight)", total=n)
    payload = [step_event(f"ep{i % 64}", i) for i in range(n)]
    async with EventProducer(settings, client_id="bench") as producer:
        encoded = [producer.codec.encode(e) for e in payload]
        topic = producer.topic(Topic.OBSERVATIONS)
        group = f"bench-{uuid.uuid4().hex[:6]}"
        async with EventConsumer(settings, [Topic.OBSERVATIONS], group, producer) as consumer:
            events = consumer.events(poll_timeout_ms=50)
            await _warm_up(producer, events)
            started = time.perf_counter()
            sends = [
                await producer.producer.send(topic, data, key=payload[i].episode_id.encode())
                for i, data in enumerate(encoded)
            ]
            received = 0
            while received < n:
                await anext(events)
                received += 1
                progress.advance(task)
            await asyncio.gather(*sends)
            elapsed = time.perf_counter() - started
    mb = sum(len(e) for e in encoded) / 1e6
    return n / elapsed, mb / elapsed


def codec_cost(n: int = 2000) -> tuple[float, float, int]:
    codec = Codec()
    event = step_event("codec", 0)
    started = time.perf_counter()
    for _ in range(n):
        data = codec.encode(event)
    enc = (time.perf_counter() - started) / n * 1e6
    started = time.perf_counter()
    for _ in range(n):
        codec.decode(data)
    dec = (time.perf_counter() - started) / n * 1e6
    return enc, dec, len(data)


def main(latency_n: int = 500, throughput_n: int = 5000) -> None:
    console.print(describe_machine())
    base = get_settings()
    asyncio.run(stack.up(base, only=["kafka", "minio"]))
    kafka = base.kafka.model_copy(update={"topic_prefix": f"bench{uuid.uuid4().hex[:6]}"})
    settings = base.model_copy(update={"kafka": kafka})
    asyncio.run(create_topics(settings))
    load_before = os.getloadavg()
    with Progress(console=console) as progress:
        lat = asyncio.run(latency(settings, latency_n, progress))
        msgs, mbs = asyncio.run(throughput(settings, throughput_n, progress))
    enc, dec, size = codec_cost()

    table = Table(title="bus round trip (embedded Kafka, zstd, acks=all, idempotent)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("event size (Avro, before zstd)", f"{size / 1024:.1f} KiB")
    table.add_row("latency p50", f"{statistics.median(lat):.2f} ms")
    table.add_row("latency p99", f"{pct(lat, 0.99):.2f} ms")
    table.add_row("latency max", f"{max(lat):.2f} ms")
    table.add_row("throughput", f"{msgs:,.0f} events/s ({mbs:.1f} MB/s)")
    table.add_row("codec encode / decode", f"{enc:.0f} / {dec:.0f} µs per event")
    table.add_row("codec share of p50", f"{(enc + dec) / 1000 / statistics.median(lat):.1%}")
    table.add_row("p99 / p50", f"{pct(lat, 0.99) / statistics.median(lat):.1f}x")
    load_after = os.getloadavg()
    table.add_row("machine", f"{os.cpu_count()} cores, load {load_before[0]:.2f} -> "
                  f"{load_after[0]:.2f} (1 min avg)")
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
