"""`webgym monitor`: a read-only web app that follows the topics live.

Delivery: none to give. The monitor reads every topic from its beginning without a
consumer group (consumers/monitor/feed.py): it commits no offset, joins no group and
publishes nothing, so no consumer of the pipeline notices it. It folds each event into
its view (state.py) and pushes what changed to the open live pages as server-sent events;
a restart reads the log again and shows the same. Bytes that do not decode are skipped
(the pipeline's own processes dead-letter them). The metrics also go to TensorBoard event
files (tensorboard.py), rewritten from the log at each start.

The story: consume (Feed) → fold (View.apply) → announce (hub.py: to the open pages) →
render (pages.py: Jinja2 templates with autoescape; page-derived text is hostile and is
only ever inserted as text).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from aiohttp import web

from consumers.monitor.feed import Feed, group_lags
from consumers.monitor.hub import Monitor, followed_topics
from consumers.monitor.pages import make_app  # the web side: templates and routes
from consumers.monitor.state import View
from consumers.monitor.tensorboard import Sink, Sinks, TensorBoardSink, WandbSink
from webgym_common.config import Settings
from webgym_common.lifecycle import mark_ready, run_until_signalled

log = logging.getLogger(__name__)

STATS_EVERY_S = 1.0


async def follow(monitor: Monitor, feed: Feed, sink: Sinks) -> None:
    async for batch in feed.records():  # consume
        for record in batch:
            change = monitor.view.apply(record.event, record.timestamp_ms)  # fold
            if change is not None:
                monitor.announce(change, record.timestamp_ms,  # render: the live pages
                                 type(record.event).__name__)
            sink.write(record.event)  # TensorBoard / W&B


async def watch_lag(monitor: Monitor, feed: Feed) -> None:
    while True:
        try:
            monitor.lags = await group_lags(monitor.settings, feed)
        except Exception as err:  # a broker hiccup must not stop the pages
            log.warning("monitor: reading consumer lag failed: %r", err)
        await asyncio.sleep(monitor.settings.monitor.lag_interval_s)


async def tick(monitor: Monitor) -> None:
    while True:
        monitor.push("stats", monitor.stats())
        await asyncio.sleep(STATS_EVERY_S)


def tensorboard_dir(settings: Settings) -> Path:
    base = settings.monitor.tensorboard_dir or settings.infra.data_dir / "tensorboard"
    return base / settings.kafka.topic_prefix


def metric_sinks(settings: Settings) -> Sinks:
    """TensorBoard (on by default) and W&B (when a project is configured)."""
    cfg = settings.monitor
    sinks: list[Sink] = []
    if cfg.tensorboard:
        sinks.append(TensorBoardSink(tensorboard_dir(settings)))
    if cfg.wandb_project:
        sinks.append(WandbSink(cfg.wandb_project, cfg.wandb_mode,
                               settings.infra.data_dir / "wandb", settings.kafka.topic_prefix))
    return Sinks(sinks)


async def serve(settings: Settings) -> None:
    cfg = settings.monitor
    monitor = Monitor(settings, View(cfg.max_episodes, cfg.dead_letters))
    sink = metric_sinks(settings)
    # Open live pages hold their streams forever: on the way out they get 2 s, not 60.
    runner = web.AppRunner(make_app(monitor), access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, cfg.host, cfg.port).start()
        async with Feed(settings, followed_topics(settings)) as feed:
            log.info("monitor on http://%s:%d/ following %d topics", cfg.host, cfg.port,
                     len(feed.topics))
            mark_ready(f"monitor on http://{cfg.host}:{cfg.port}/")
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(follow(monitor, feed, sink))
                tasks.create_task(watch_lag(monitor, feed))
                tasks.create_task(tick(monitor))
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(runner.cleanup(), 10)
        sink.close()


async def run_monitor(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT."""
    await run_until_signalled(serve(settings))
