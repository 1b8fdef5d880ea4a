"""Loading a WebGym-sized task file: lines/s of `webgym tasks load` into the real broker.

  .venv/bin/python -m bench.task_load [--lines 300000]

Writes a task file in WebGym's shapes (integer and absent task ids, websites without a
scheme, every evaluator_reference variant, 1 % repeated tasks, 0.1 % broken lines; no split
on a line: WebGym keeps train and test in separate files, so the file is read and loaded as
a train file, `webgym tasks load FILE --split train`), then measures in one process: the
baseline (`json.loads` of every line, the floor of any loader), parsing alone
(`read_task_file`: validation into Task events) and the whole load (`load_tasks` with its
progress bars: parse, then publish to webgym.tasks on the embedded stack, started if it is
not up, under a fresh topic prefix).
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
import time
import uuid
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.machine import describe_machine
from infra import stack
from producers.catalog import load_tasks
from webgym_common.choices import Split
from webgym_common.config import get_settings
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


def main(lines: int = 300_000) -> None:
    console.print(describe_machine())
    base = get_settings()
    path = Path(tempfile.mkdtemp(prefix="bench-tasks-")) / "tasks.jsonl"
    with console.status(f"writing {lines:,} lines"):
        write_file(path, lines)
    size_mb = path.stat().st_size / 1e6

    started = time.perf_counter()
    with path.open() as src:
        for text in src:
            if not text.startswith('{"task_name": "cut'):  # the broken lines would raise
                json.loads(text)
    raw_s = time.perf_counter() - started

    started = time.perf_counter()
    tasks, bad = read_task_file(path, split=Split.TRAIN)
    parse_s = time.perf_counter() - started

    asyncio.run(stack.up(base))
    settings = base.model_copy(update={"kafka": base.kafka.model_copy(
        update={"topic_prefix": f"btasks{uuid.uuid4().hex[:6]}"})})

    async def load() -> float:
        await create_topics(settings)
        async with EventProducer(settings, client_id="bench") as producer:
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console) as progress:
                report = await load_tasks(path, producer, progress, split=Split.TRAIN)
        assert len(report.loaded) == len(tasks), (len(report.loaded), len(tasks))
        return report.seconds

    load_s = asyncio.run(load())
    table = Table(title=f"{lines:,} WebGym task lines ({size_mb:.0f} MB): {len(tasks):,} tasks, "
                        f"{len(bad):,} bad or repeated lines")
    for col in ("step", "seconds", "lines/s", "vs json.loads"):
        table.add_column(col, justify="right")
    for name, secs in (("json.loads only (baseline)", raw_s), ("parse + validate", parse_s),
                       ("tasks load (parse + publish)", load_s)):
        table.add_row(name, f"{secs:.1f}", f"{lines / secs:,.0f}", f"{raw_s / secs:.2f}")
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
