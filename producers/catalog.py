"""The task catalog: JSONL task files into the compacted webgym.tasks topic, and back.

`webgym tasks load FILE.jsonl [--split SPLIT]` validates every line; a bad line (a line
without a split when the file is given none among them) is reported with its number and
reason and skipped, the good ones are published keyed by task_id.

Delivery: at least once per good line, in file order per task id (a batch is published
whole before the next is sent, so the last line of a repeated id is the one the compacted
topic keeps). The file is streamed: lines are parsed in batches of PUBLISH_BATCH tasks in a
worker thread, the next batch while the previous one is published, so memory holds two
batches and 8 bytes per distinct task, whatever the file's size (bench/task_load.py
measures it); the report keeps the first MAX_REPORTED bad lines and repeated ids and counts
the rest.
Because the topic is compacted, loading a file again replaces each task with its
latest version, and `load_task_catalog` (read to the end, latest record per key)
is the catalog the controller samples from.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
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
from webgym_common.tasks import (
    BadLine,
    key_digest,
    parse_task_lines,
    task_file_lines,
)
from webgym_common.topics import Topic

# Publishes in flight at once: one round trip per task would take minutes for a
# 300k-task file, while unbounded concurrency would queue the whole file in memory.
PUBLISH_BATCH = 256
MAX_REPORTED = 1000  # bad lines and repeated ids listed in the report (the rest counted)


class Publisher(Protocol):
    async def publish(self, topic: Topic, key: str, event: Event) -> None: ...


@dataclass
class LoadReport:
    path: Path
    loaded: int = 0  # distinct task ids published
    bad: list[BadLine] = field(default_factory=list)  # the first MAX_REPORTED
    bad_lines: int = 0
    duplicates: list[str] = field(default_factory=list)  # ids on more than one line: the first
    repeated: int = 0  # ... MAX_REPORTED, and how many lines repeated an id in all
    lines: int = 0
    seconds: float = 0.0

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.seconds if self.seconds > 0 else 0.0

    def note_bad(self, bad: BadLine) -> None:
        self.bad_lines += 1
        if len(self.bad) < MAX_REPORTED:
            self.bad.append(bad)

    def note_repeat(self, task_id: str) -> None:
        self.repeated += 1
        if len(self.duplicates) < MAX_REPORTED:
            self.duplicates.append(task_id)


async def load_tasks(path: Path, producer: Publisher, progress: Progress | None = None,
                     split: Split | None = None) -> LoadReport:
    """Validate a task file and publish its good lines to webgym.tasks (key: task_id), as a
    stream; `split` is the file's, for lines that name none; `progress` gets a bar for
    reading (bytes) and one for publishing (tasks)."""
    started = time.perf_counter()
    report = LoadReport(path)
    size = (await asyncio.to_thread(path.stat)).st_size
    reading = progress.add_task("reading", total=size) if progress is not None else None
    publishing = progress.add_task("publishing", total=None) if progress is not None else None

    def on_lines(lines: int, done: int) -> None:
        report.lines = lines
        if progress is not None and reading is not None:
            progress.update(reading, completed=done, description=f"reading: {lines:,} lines")

    def on_published(tasks: int) -> None:
        if progress is not None and publishing is not None:
            progress.advance(publishing, tasks)

    await publish_tasks(parse_task_lines(task_file_lines(path, on_lines), split), producer,
                        report, on_published)
    if progress is not None and publishing is not None:
        progress.update(publishing, total=progress.tasks[publishing].completed)
    report.seconds = time.perf_counter() - started
    return report


async def publish_tasks(parsed: Iterator[Task | BadLine], producer: Publisher,
                        report: LoadReport, on_published: Callable[[int], None] | None = None,
                        batch_size: int = PUBLISH_BATCH) -> None:
    """Publish the stream's tasks in batches of `batch_size`, taking each batch from
    `parsed` (in a thread: parsing is CPU work) only when the one before it is being
    published; its bad lines go to the report. A task id repeated within a batch is
    published once, with its last line (concurrent publishes never race on one key)."""

    def take() -> list[Task]:
        batch: list[Task] = []
        for item in parsed:
            if isinstance(item, BadLine):
                report.note_bad(item)
                continue
            batch.append(item)
            if len(batch) == batch_size:
                break
        return batch

    seen: set[int] = set()  # 8 bytes per distinct task id, never the tasks
    pending = asyncio.ensure_future(asyncio.to_thread(take))
    try:
        while batch := await pending:
            pending = asyncio.ensure_future(asyncio.to_thread(take))
            latest: dict[str, Task] = {}
            for task in batch:
                digest = key_digest(task.task_id)
                if digest in seen:
                    report.note_repeat(task.task_id)
                seen.add(digest)
                latest[task.task_id] = task
            await asyncio.gather(*(producer.publish(Topic.TASKS, t.task_id, t)
                                   for t in latest.values()))
            if on_published is not None:
                on_published(len(latest))
    finally:
        # A failed publish leaves the next batch's parse to finish in its thread, unused.
        pending.cancel()
    report.loaded = len(seen)


def print_load_report(report: LoadReport, topic: str, console: Console) -> None:
    def say(text: str) -> None:
        # Paths, reasons and ids are data: escaped, not highlighted, and no emoji (":100:" is one).
        console.print(text, highlight=False, emoji=False)

    for b in report.bad:
        say(f"[yellow]{escape(f'{report.path}:{b.line_number}')}: skipped:[/yellow] "
            f"{escape(b.reason)}")
    if report.bad_lines > len(report.bad):
        say(f"[yellow]... and {report.bad_lines - len(report.bad):,} more bad lines[/yellow]")
    if report.repeated:
        shown = ", ".join(sorted(set(report.duplicates))[:10])
        say(f"[yellow]{report.repeated} repeated task ids "
            f"(the last line wins):[/yellow] {escape(shown)}")
    say(f"loaded {report.loaded} tasks into {escape(topic)}; "
        f"skipped {report.bad_lines} bad lines")
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
