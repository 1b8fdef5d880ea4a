"""Loading a WebGym-sized task file: lines/s and peak memory of `webgym tasks load` into a
real broker.

  .venv/bin/python -m bench.task_load [--lines 1000000]

Writes a task file in WebGym's shapes (integer and absent task ids, websites without a
scheme, every evaluator_reference variant, 1 % repeated tasks, 0.1 % broken lines; no split
on a line: WebGym keeps train and test in separate files, so the file is read and loaded as
a train file, `webgym tasks load FILE --split train`), starts a Kafka of its own (free ports,
a temporary data dir, stopped at the end: a stack already running is never touched), then
measures, each in a fresh process so its peak RSS is its own: the whole load (`load_tasks`:
the file streamed, parsed and published in batches to webgym.tasks) and, for comparison,
parsing the file into memory whole (`read_task_file`, what the loader did before it
streamed). The baseline is `json.loads` of every line, the floor of any loader.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import random
import resource
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from multiprocessing.queues import Queue
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from harness.machine import describe_machine
from infra import stack
from infra.procs import free_port
from producers.catalog import load_tasks
from webgym_common.choices import Split
from webgym_common.config import InfraSettings, Settings, load_settings
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer
from webgym_common.tasks import read_task_file

console = Console()


def webgym_line(i: int, rng: random.Random) -> str:
    task: dict[str, object] = {
        "task_name": f"Find the opening hours of museum {i} and the price of a ticket",
        "domain": "travel", "subdomain": f"museums-{i % 97}",
        "website": f"www.museum{i}.example.org", "difficulty": 1 + i % 9,
        "definite_answer": None if i % 2 else f"{9 + i % 3} to 5",
    }
    if i % 3:
        task["task_id"] = i
    shape = i % 4
    task["evaluator_reference"] = [
        "Shows the opening hours",
        ["Shows the opening hours", "Shows the ticket price"],
        [{"description": "Shows the opening hours", "difficulty": 2}],
        [{"id": 1, "description": "Hours", "facts": ["9 to 5", "9am-5pm"]},
         {"id": 2, "description": "Price", "facts": ["$12"]}],
    ][shape]
    if rng.random() < 0.2:
        task["attempt_level"] = rng.randint(0, 3)
        task["_trajectory_index"] = rng.randint(0, 9)
    return json.dumps(task)


def write_file(path: Path, lines: int) -> None:
    rng = random.Random(5)
    with path.open("w") as out:
        for i in range(lines):
            roll = rng.random()
            if roll < 0.001:
                out.write('{"task_name": "cut short\n')
            elif roll < 0.011 and i > 0:
                out.write(webgym_line(rng.randrange(i), random.Random(0)) + "\n")  # a repeat
            else:
                out.write(webgym_line(i, rng) + "\n")


def bench_settings(data_dir: str) -> Settings:
    ports = {name: free_port() for name in ("kafka_port", "kafka_controller_port",
                                            "minio_port", "minio_console_port", "sandbox_port")}
    return load_settings(infra={"home": InfraSettings().home, "data_dir": data_dir, **ports},
                         kafka={"topic_prefix": f"btasks{uuid.uuid4().hex[:6]}"})


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure_load(settings: Settings, path: Path, out: Queue) -> None:
    """In a child process: the whole `tasks load`, its seconds, tasks and peak RSS."""
    async def load() -> tuple[float, int]:
        await create_topics(settings)
        async with EventProducer(settings, client_id="bench") as producer:
            report = await load_tasks(path, producer, split=Split.TRAIN)
        return report.seconds, report.loaded

    before = peak_rss_mb()
    seconds, loaded = asyncio.run(load())
    out.put((seconds, loaded, before, peak_rss_mb()))


def measure_parse_whole(path: Path, out: Queue) -> None:
    """In a child process: the file parsed into memory whole (the loader before streaming)."""
    before = peak_rss_mb()
    started = time.perf_counter()
    tasks, _ = read_task_file(path, split=Split.TRAIN)
    out.put((time.perf_counter() - started, len(tasks), before, peak_rss_mb()))


def in_child(target: Callable[..., object], *args: object) -> tuple[float, int, float, float]:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=target, args=(*args, out))
    child.start()
    result = out.get()
    child.join()
    return result


def main(lines: int = 1_000_000) -> None:
    console.print(describe_machine())
    data_dir = tempfile.mkdtemp(prefix="bench-tasks-")
    path = Path(data_dir) / "tasks.jsonl"
    with console.status(f"writing {lines:,} lines"):
        write_file(path, lines)
    size_mb = path.stat().st_size / 1e6

    started = time.perf_counter()
    with path.open() as src:
        for text in src:
            if not text.startswith('{"task_name": "cut'):  # the broken lines would raise
                json.loads(text)
    raw_s = time.perf_counter() - started

    settings = bench_settings(data_dir)
    with console.status("starting a Kafka of its own"):
        asyncio.run(stack.up(settings, only=["kafka"]))
    try:
        with console.status(f"loading {lines:,} lines"):
            load_s, loaded, load_base, load_peak = in_child(measure_load, settings, path)
    finally:
        stack.down(settings)
    with console.status("parsing the file whole"):
        parse_s, tasks, parse_base, parse_peak = in_child(measure_parse_whole, path)
    assert loaded == tasks, (loaded, tasks)
    shutil.rmtree(data_dir, ignore_errors=True)

    table = Table(title=f"{lines:,} WebGym task lines ({size_mb:.0f} MB): {tasks:,} tasks")
    for col in ("step", "seconds", "lines/s", "vs json.loads", "peak RSS MB",
                "RSS at start MB"):
        table.add_column(col, justify="right")
    table.add_row("json.loads only (baseline)", f"{raw_s:.1f}", f"{lines / raw_s:,.0f}",
                  "1.00", "", "")
    table.add_row("parse whole into memory (old loader)", f"{parse_s:.1f}",
                  f"{lines / parse_s:,.0f}", f"{raw_s / parse_s:.2f}", f"{parse_peak:,.0f}",
                  f"{parse_base:,.0f}")
    table.add_row("tasks load, streamed (parse + publish)", f"{load_s:.1f}",
                  f"{lines / load_s:,.0f}", f"{raw_s / load_s:.2f}", f"{load_peak:,.0f}",
                  f"{load_base:,.0f}")
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
