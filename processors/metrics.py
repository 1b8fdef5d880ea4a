"""The metrics process: scored episodes and iteration closes in, RolloutMetrics out.

Delivery: no consumer group and no commits. The process reads webgym.episodes.scored
and webgym.control from the beginning on every start: its state is the log itself,
so a crash loses nothing, and a repeated episode id counts once. A publish is
skipped when webgym.metrics already holds the same numbers, so a restart that
recomputes every closed iteration publishes nothing new.

When an iteration is closed (IterationClosed), or a late-scored episode of a closed
iteration arrives, it publishes RolloutMetrics to the compacted webgym.metrics
(key: iteration), then rewrites the CSV and the PNG from the whole table. The
metrics themselves are defined in webgym_common.metrics.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from webgym_common.bus import EventConsumer, EventProducer, Received, batches_to_end
from webgym_common.config import Settings
from webgym_common.events import EpisodeScored, IterationClosed, RolloutMetrics
from webgym_common.lifecycle import mark_ready, run_until_signalled
from webgym_common.metrics import (
    EpisodeSummary,
    default_csv_path,
    load_metrics_table,
    metrics_from,
    print_metrics,
    same_numbers,
    summarize,
    write_outputs,
)
from webgym_common.topics import Topic

log = logging.getLogger(__name__)


class MetricsState:
    """Episodes per iteration and which iterations are closed, folded from the two topics."""

    def __init__(self) -> None:
        self.episodes: dict[int, dict[str, EpisodeSummary]] = {}
        self.closed: dict[int, IterationClosed] = {}
        self.dirty: set[int] = set()

    def fold(self, batch: list[Received]) -> None:
        for r in batch:
            e = r.event
            if isinstance(e, EpisodeScored):
                seen = self.episodes.setdefault(e.iteration, {})
                if e.episode_id not in seen:
                    seen[e.episode_id] = summarize(e)
                    self.dirty.add(e.iteration)
            elif isinstance(e, IterationClosed):
                self.closed[e.iteration] = e
                self.dirty.add(e.iteration)

    def take_ready(self) -> list[RolloutMetrics]:
        """Metrics of closed iterations that changed since the last call."""
        ready = sorted(self.dirty & self.closed.keys())
        self.dirty -= set(ready)
        out = []
        for it in ready:
            split = self.closed[it].split
            eps = [e for e in self.episodes.get(it, {}).values() if e.split == split]
            out.append(metrics_from(it, split, eps))
        return out


def to_publish(
    ready: Iterable[RolloutMetrics], table: dict[int, RolloutMetrics]
) -> list[RolloutMetrics]:
    """The ready metrics whose numbers differ from what webgym.metrics holds."""
    return [m for m in ready if not same_numbers(m, table.get(m.iteration))]


async def follow_iterations(settings: Settings, csv_path: Path) -> None:
    async with EventProducer(settings, client_id="metrics") as producer:
        table = await load_metrics_table(settings, producer)
        if table:  # a crash between publish and write left the files behind the topic
            write_outputs(table, csv_path)
        state = MetricsState()
        consumer = EventConsumer(settings, [Topic.EPISODES_SCORED, Topic.CONTROL], None,
                                 producer, client_id="metrics")
        async with consumer:
            mark_ready("metrics reads scored episodes and closes")
            while True:
                # consume: wait for anything new, then catch up with both topics, so an
                # IterationClosed is judged with the episodes scored before it
                fresh = await consumer.poll(timeout_ms=500)
                if not fresh:
                    continue
                state.fold(fresh)
                async for batch in batches_to_end(consumer, stall_timeout_s=120):
                    state.fold(batch)
                # decide: only closed iterations whose numbers differ from the topic's
                changed = to_publish(state.take_ready(), table)
                # publish, then the files (the topic is the record; files follow it)
                for m in changed:
                    await producer.publish(Topic.METRICS, str(m.iteration), m)
                    table[m.iteration] = m
                if changed:
                    write_outputs(table, csv_path)
                    print_metrics(changed)
                    log.info("metrics published for iterations %s; %s",
                             [m.iteration for m in changed], csv_path)


async def run_metrics_worker(settings: Settings, csv_path: Path | None = None) -> None:
    """Run until SIGTERM/SIGINT."""
    await run_until_signalled(follow_iterations(settings, csv_path or default_csv_path(settings)))
