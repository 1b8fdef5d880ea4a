"""The task catalog: JSONL task files into the compacted webgym.tasks topic, and back.

`webgym tasks load FILE.jsonl [--split SPLIT]` validates every line; a bad line (a line
without a split when the file is given none among them) is reported with its number and
reason and skipped, the good ones are published keyed by task_id.
Because the topic is compacted, loading a file again replaces each task with its
latest version, and `load_task_catalog` (read to the end, latest record per key)
is the catalog the controller samples from.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from webgym_common.choices import Split
from webgym_common.config import Settings
from webgym_common.events import Event, Task
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.readers import read_compacted
from webgym_common.tasks import BadLine, read_task_file
from webgym_common.topics import Topic

# Publishes in flight at once: one round trip per task would take minutes for a
# 300k-task file, while unbounded concurrency would queue the whole file in memory.
PUBLISH_BATCH = 256


class Publisher(Protocol):
    async def publish(self, topic: Topic, key: str, event: Event) -> None: ...


@dataclass
class LoadReport:
    path: Path
    loaded: list[Task] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)  # task ids seen on more than one line
    lines: int = 0
    seconds: float = 0.0

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.seconds if self.seconds > 0 else 0.0


async def load_tasks(path: Path, producer: Publisher, progress: Progress | None = None,
                     split: Split | None = None) -> LoadReport:
    """Validate a task file and publish its good lines to webgym.tasks (key: task_id);
    `split` is the file's, for lines that name none; `progress` gets a bar for reading
    (bytes) and one for publishing (tasks)."""
    started = time.perf_counter()
    report = LoadReport(path)
    size = (await asyncio.to_thread(path.stat)).st_size
    reading = progress.add_task("reading", total=size) if progress is not None else None

    def on_lines(lines: int, done: int) -> None:
        report.lines = lines
        if progress is not None and reading is not None:
            progress.update(reading, completed=done, description=f"reading: {lines:,} lines")

    # In a thread: a 300k-line file takes seconds, and the loop keeps the producer alive.
    tasks, report.bad = await asyncio.to_thread(read_task_file, path, on_lines, split)
    # A task id repeated in the file: the last line wins, as it would on the topic.
    # Deduplicating first means concurrent publishes never race on one key.
    latest: dict[str, Task] = {}
    for task in tasks:
        if task.task_id in latest:
            report.duplicates.append(task.task_id)
        latest[task.task_id] = task
    report.loaded = list(latest.values())
    publishing = (progress.add_task("publishing", total=len(report.loaded))
                  if progress is not None else None)
    for start in range(0, len(report.loaded), PUBLISH_BATCH):
        batch = report.loaded[start : start + PUBLISH_BATCH]
        await asyncio.gather(*(producer.publish(Topic.TASKS, t.task_id, t) for t in batch))
        if progress is not None and publishing is not None:
            progress.advance(publishing, len(batch))
    report.seconds = time.perf_counter() - started
    return report


def print_load_report(report: LoadReport, topic: str, console: Console) -> None:
    def say(text: str) -> None:
        # Paths, reasons and ids are data: escaped, not highlighted, and no emoji (":100:" is one).
        console.print(text, highlight=False, emoji=False)

    for b in report.bad:
        say(f"[yellow]{escape(f'{report.path}:{b.line_number}')}: skipped:[/yellow] "
            f"{escape(b.reason)}")
    if report.duplicates:
        shown = ", ".join(sorted(set(report.duplicates))[:10])
        say(f"[yellow]{len(report.duplicates)} repeated task ids "
            f"(the last line wins):[/yellow] {escape(shown)}")
    say(f"loaded {len(report.loaded)} tasks into {escape(topic)}; "
        f"skipped {len(report.bad)} bad lines")
    if report.seconds:
        say(f"{report.lines:,} lines in {report.seconds:.1f} s "
            f"({report.lines_per_s:,.0f} lines/s)")


async def run_tasks_load(settings: Settings, path: Path, console: Console,
                         split: Split | None = None) -> LoadReport:
    async with EventProducer(settings, client_id="catalog") as producer:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=True) as progress:
            report = await load_tasks(path, producer, progress, split)
        print_load_report(report, producer.topic(Topic.TASKS), console)
    return report


async def load_task_catalog(settings: Settings, producer: EventProducer) -> dict[str, Task]:
    """The current task catalog: task_id -> latest Task on webgym.tasks."""
    table = await read_compacted(settings, Topic.TASKS, producer)
    return {k: v for k, v in table.items() if isinstance(v, Task)}
