"""The metrics process: scored episodes and iteration closes in, RolloutMetrics out.

Delivery: no consumer group and no commits. The process reads webgym.episodes.scored,
webgym.control and webgym.metrics from the beginning on every start: its state is
the log itself, so a crash loses nothing, and a repeated episode id counts once. A
publish is skipped when webgym.metrics already holds the same numbers, so a restart
that recomputes every closed iteration publishes nothing new.

When an iteration is closed (IterationClosed), a late-scored episode of a closed
iteration arrives, or someone publishes other numbers for it (a controller that
computed them from the scores it had seen), it publishes RolloutMetrics to the
compacted webgym.metrics (key: iteration), then rewrites the CSV and the PNG from
the whole table. The metrics and their fold are in webgym_common.metrics.fold.
"""

from __future__ import annotations

import logging
from pathlib import Path

from webgym_common.config import Settings
from webgym_common.lifecycle import mark_ready, run_until_signalled
from webgym_common.metrics.fold import MetricsFold
from webgym_common.metrics.plots import print_metrics
from webgym_common.metrics.storage import (
    default_csv_path,
    load_metrics_table,
    publish_changed,
    write_outputs,
)
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import batches_to_end
from webgym_common.topics import Topic

log = logging.getLogger(__name__)


async def follow_iterations(settings: Settings, csv_path: Path) -> None:
    async with EventProducer(settings, client_id="metrics") as producer:
        state = MetricsFold(await load_metrics_table(settings, producer))
        if state.table:  # a crash between publish and write left the files behind the topic
            write_outputs(state.table, csv_path)
        consumer = EventConsumer(settings, [Topic.EPISODES_SCORED, Topic.CONTROL, Topic.METRICS],
                                 None, producer, client_id="metrics")
        async with consumer:
            mark_ready("metrics reads scored episodes and closes")
            while True:
                # consume: wait for anything new, then catch up with every topic, so an
                # IterationClosed is judged with the episodes scored before it
                fresh = await consumer.poll(timeout_ms=500)
                if not fresh:
                    continue
                state.fold(r.event for r in fresh)
                async for batch in batches_to_end(consumer, stall_timeout_s=120):
                    state.fold(r.event for r in batch)
                # decide and publish: only closed iterations whose numbers differ from the
                # topic's, then the files
                changed = await publish_changed(state, producer, csv_path)
                if changed:
                    print_metrics(changed)
                    log.info("metrics published for iterations %s; %s",
                             [m.iteration for m in changed], csv_path)


async def run_metrics_worker(settings: Settings, csv_path: Path | None = None) -> None:
    """Run until SIGTERM/SIGINT."""
    await run_until_signalled(follow_iterations(settings, csv_path or default_csv_path(settings)))
