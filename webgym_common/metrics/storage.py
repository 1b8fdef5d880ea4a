"""Where the metrics live: the compacted webgym.metrics (key: iteration) is the record; the
CSV (one row per iteration) and the PNG beside it are rewritten from that whole table.

Delivery: the topic first, then the files, so the files never show numbers the topic lacks.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from webgym_common.config import Settings
from webgym_common.events import RolloutMetrics
from webgym_common.metrics.fold import CSV_COLUMNS, MetricsFold, column
from webgym_common.metrics.plots import plot_metrics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import batches_to_end, read_compacted
from webgym_common.topics import Topic


async def recompute_metrics(settings: Settings, producer: EventProducer,
                            csv_path: Path) -> dict[int, RolloutMetrics]:
    """Every closed iteration's metrics from the log as it is now; publishes (and writes the
    files of) those that differ from webgym.metrics. Returns the corrected table."""
    fold = MetricsFold()
    topics = [Topic.METRICS, Topic.EPISODES_SCORED, Topic.CONTROL]
    async with EventConsumer(settings, topics, None, producer, client_id="metrics-fold") as c:
        async for batch in batches_to_end(c, stall_timeout_s=120):
            fold.fold(r.event for r in batch)
    await publish_changed(fold, producer, csv_path)
    return fold.table


async def publish_changed(fold: MetricsFold, producer: EventProducer,
                          csv_path: Path) -> list[RolloutMetrics]:
    """Publish the closed iterations whose numbers changed, then rewrite the files: the topic
    is the record and the files follow it. Returns what was published."""
    changed = fold.changed()
    for m in changed:
        await producer.publish(Topic.METRICS, str(m.iteration), m)
        fold.table[m.iteration] = m
    if changed:
        write_outputs(fold.table, csv_path)
    return changed


async def load_metrics_table(
    settings: Settings, producer: EventProducer
) -> dict[int, RolloutMetrics]:
    """iteration -> latest RolloutMetrics on webgym.metrics."""
    table = await read_compacted(settings, Topic.METRICS, producer)
    return {int(k): v for k, v in table.items() if isinstance(v, RolloutMetrics)}


def default_csv_path(settings: Settings) -> Path:
    return Path(settings.infra.data_dir) / "metrics" / "metrics.csv"


def write_outputs(table: dict[int, RolloutMetrics], csv_path: Path) -> None:
    """Rewrite the PNG (beside the CSV) and then the CSV from the whole table, atomically.

    The CSV goes last, so a reader that sees a row also finds the plot that shows it.
    """
    rows = [table[it] for it in sorted(table)]
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    plot_metrics(rows, csv_path.with_suffix(".png"))
    tmp = csv_path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for m in rows:
            writer.writerow([column(m, c) for c in CSV_COLUMNS])
    os.replace(tmp, csv_path)
