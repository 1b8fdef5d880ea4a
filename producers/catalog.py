"""The task catalog: JSONL task files into the compacted webgym.tasks topic, and back.

`webgym tasks load FILE.jsonl` validates every line; a bad line is reported with
its number and reason and skipped, the good ones are published keyed by task_id.
Because the topic is compacted, loading a file again replaces each task with its
latest version, and `load_task_catalog` (read to the end, latest record per key)
is the catalog the controller samples from.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from aiokafka import TopicPartition
from rich.console import Console
from rich.markup import escape

from webgym_common.bus import EventConsumer, EventProducer, Received
from webgym_common.config import Settings
from webgym_common.events import Event, Task
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


async def load_tasks(path: Path, producer: Publisher) -> LoadReport:
    """Validate a task file and publish its good lines to webgym.tasks (key: task_id)."""
    tasks, bad = read_task_file(path)
    report = LoadReport(path, bad=bad)
    # A task id repeated in the file: the last line wins, as it would on the topic.
    # Deduplicating first means concurrent publishes never race on one key.
    latest: dict[str, Task] = {}
    for task in tasks:
        if task.task_id in latest:
            report.duplicates.append(task.task_id)
        latest[task.task_id] = task
    report.loaded = list(latest.values())
    for start in range(0, len(report.loaded), PUBLISH_BATCH):
        batch = report.loaded[start : start + PUBLISH_BATCH]
        await asyncio.gather(*(producer.publish(Topic.TASKS, t.task_id, t) for t in batch))
    return report


def print_load_report(report: LoadReport, topic: str, console: Console) -> None:
    # Paths, reasons and ids are data: no rich markup, and no emoji (":100:" is one).
    plain = {"highlight": False, "emoji": False}
    for b in report.bad:
        console.print(f"[yellow]{escape(f'{report.path}:{b.line_number}')}: skipped:[/yellow] "
                      f"{escape(b.reason)}", **plain)
    if report.duplicates:
        shown = ", ".join(sorted(set(report.duplicates))[:10])
        console.print(f"[yellow]{len(report.duplicates)} repeated task ids "
                      f"(the last line wins):[/yellow] {escape(shown)}", **plain)
    console.print(f"loaded {len(report.loaded)} tasks into {escape(topic)}; "
                  f"skipped {len(report.bad)} bad lines", **plain)


async def run_tasks_load(settings: Settings, path: Path, console: Console) -> LoadReport:
    async with EventProducer(settings, client_id="catalog") as producer:
        report = await load_tasks(path, producer)
        print_load_report(report, producer.topic(Topic.TASKS), console)
    return report


# -- reading compacted topics back --------------------------------------------------


async def batches_to_end(
    consumer: EventConsumer, stall_timeout_s: float = 60.0
) -> AsyncIterator[list[Received]]:
    """Batches from the consumer's assigned partitions up to their end offsets as of now.

    The end offsets are taken once, so a busy topic cannot keep the read going
    forever; records past them that come in the same fetch are kept. Raises
    TimeoutError when no partition moves for `stall_timeout_s` (a long log is fine).
    """
    c = consumer.consumer
    parts = sorted(c.assignment())
    # end_offsets and position can block for good if a partition is gone.
    ends = await asyncio.wait_for(c.end_offsets(parts), stall_timeout_s)
    loop = asyncio.get_running_loop()
    last: dict[TopicPartition, int] = {}
    moved_at = loop.time()
    while True:
        now = {tp: await asyncio.wait_for(c.position(tp), stall_timeout_s) for tp in parts}
        if all(now[tp] >= ends[tp] for tp in parts):
            return
        if now != last:
            last, moved_at = now, loop.time()
        elif loop.time() - moved_at > stall_timeout_s:
            raise TimeoutError(f"reading {', '.join(consumer.topic_names)} to its end stalled")
        batch = await consumer.poll(timeout_ms=200)
        if batch:
            yield batch


async def read_to_end(consumer: EventConsumer, stall_timeout_s: float = 60.0) -> list[Received]:
    return [r async for batch in batches_to_end(consumer, stall_timeout_s) for r in batch]


async def read_compacted(
    settings: Settings, topic: Topic, producer: EventProducer, stall_timeout_s: float = 60.0
) -> dict[str, Event]:
    """A compacted topic as a table: the latest event per key (no group, nothing committed)."""
    latest: dict[str, Event] = {}
    async with EventConsumer(settings, [topic], None, producer, client_id="table-reader") as c:
        # Within a partition the later offset is the newer value; a key lives in one partition.
        for received in await read_to_end(c, stall_timeout_s):
            if received.key is not None:
                latest[received.key] = received.event
    return latest


async def load_task_catalog(settings: Settings, producer: EventProducer) -> dict[str, Task]:
    """The current task catalog: task_id -> latest Task on webgym.tasks."""
    table = await read_compacted(settings, Topic.TASKS, producer)
    return {k: v for k, v in table.items() if isinstance(v, Task)}
