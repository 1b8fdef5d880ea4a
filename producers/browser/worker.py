"""A browser worker process: consume episodes and actions, run episodes, publish steps.

Delivery: every requested episode ends with exactly one EpisodeCompleted, whoever runs
it and whatever is killed. One consumer group over webgym.episodes and webgym.actions
(co-partitioned by episode id), so the worker that owns an episode also receives its
actions. An episode's request and actions stay uncommitted until its EpisodeCompleted
is published (offsets.py), so when its partition moves (a kill, a rebalance) the next
owner re-reads them and resumes the episode by re-running its actions (duplicate
StepObserved events for already observed steps are expected; consumers key them by
(episode_id, step)). Episodes that already ended are known from
webgym.episodes.completed (finished.py) and are never run again. On revocation the
episodes of the revoked partitions are cancelled at once and publish nothing more;
a partition assigned again is a fresh start from its committed offset. Where each
record goes is decided in routing.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import OrderedDict

from aiokafka import TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from producers.browser import routing
from producers.browser.browser_pool import BrowserPool
from producers.browser.commits import commit_every, commit_held
from producers.browser.control import follow_cancels
from producers.browser.episode import EpisodeRunner
from producers.browser.finished import CompletedLog, FinishedEpisodes
from producers.browser.retries import best_effort
from producers.browser.session import EpisodeSession
from producers.browser.urlpolicy import UrlPolicy
from webgym_common.config import Settings
from webgym_common.events import ActionChosen, CancelEpisode, EpisodeRequested
from webgym_common.lifecycle import mark_ready, run_until_signalled
from webgym_common.objectstore import ObjectStore
from webgym_common.stream.bus import EventConsumer, EventProducer, Received
from webgym_common.stream.offsets import OffsetHolds
from webgym_common.topics import Group, Topic, group_id

log = logging.getLogger(__name__)

CONTEXTS_EVERY_S = 1.0


class BrowserWorker(ConsumerRebalanceListener):
    def __init__(self, settings: Settings, worker_id: str | None = None) -> None:
        self.settings = settings
        self.cfg = settings.browser
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.producer = EventProducer(settings, client_id=f"browser-{self.worker_id}")
        self.consumer = EventConsumer(
            settings, [Topic.EPISODES, Topic.ACTIONS], group_id(settings.kafka, Group.BROWSERS),
            self.producer, client_id=f"browser-{self.worker_id}", listener=self,
        )
        self.consumer.on_skip = self._skip
        self.completed = CompletedLog(settings, self.producer.codec, f"browser-{self.worker_id}")
        self.store = ObjectStore(settings.s3)
        self.pool = BrowserPool(settings.browser, self._browser_lost,
                                UrlPolicy.from_settings(settings))
        self.runner = EpisodeRunner(settings, self.pool, self.producer, self.store, self.worker_id)
        self.slots = asyncio.Semaphore(settings.browser.contexts)
        self.holds = OffsetHolds()
        self.sessions: dict[str, EpisodeSession] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        self.finished = FinishedEpisodes()
        self.cancelled: OrderedDict[str, str] = OrderedDict()
        self.early_actions = routing.EarlyActions()
        self.generation = 0  # bumped by every rebalance: records read before it are stale
        self.ready = False

    # -- the story --------------------------------------------------------------

    async def run(self) -> None:
        await self.store.ensure_bucket()
        await self.pool.start()
        await self.producer.start()
        await self.completed.start()
        await self.consumer.start()
        helpers = [
            asyncio.create_task(commit_every(0.5, self.holds, self.consumer.consumer)),
            asyncio.create_task(follow_cancels(self.settings, self.producer, self._on_cancel)),
            asyncio.create_task(self._drop_stale_early_actions()),
            asyncio.create_task(self._report_contexts()),
        ]
        log.info("browser worker %s: %d contexts, chromium %s", self.worker_id,
                 self.settings.browser.contexts, self.pool.version)
        try:
            while True:
                batch = await self.consumer.poll(200)
                generation = self.generation
                for received in batch:
                    await self._know_who_ended(received)
                    if self.generation != generation:
                        break  # rebalanced meanwhile: the partitions are read again
                    self._handle(received)
        finally:
            self.pool.stopping()
            for task in helpers:
                task.cancel()
            await self._revoke(set(self.consumer.consumer.assignment()))
            await self.consumer.stop()
            await self.completed.stop()
            await self.producer.stop()
            await self.pool.stop()

    def _handle(self, received: Received) -> None:
        event = received.event
        if isinstance(event, EpisodeRequested):
            self._on_request(received, event)
        elif isinstance(event, ActionChosen):
            self._on_action(received, event)
        else:
            self.holds.seen(received.tp, received.offset)

    def _on_request(self, received: Received, request: EpisodeRequested) -> None:
        eid, p = request.episode_id, received.partition
        if not routing.starts_episode(eid, self.finished.of(p), self.sessions):
            self.holds.seen(received.tp, received.offset)
            return
        self.holds.hold(received.tp, received.offset, eid)
        session = EpisodeSession(request, p)
        self.sessions[eid] = session
        for action in self.early_actions.take(eid):
            session.inbox.put_nowait(action)
        if eid in self.cancelled:
            session.stop("cancelled", self.cancelled[eid])
        self.tasks[eid] = asyncio.create_task(self._run_episode(session))

    def _on_action(self, received: Received, action: ActionChosen) -> None:
        eid = action.episode_id
        route = routing.route_action(eid, self.finished.of(received.partition), self.sessions)
        if route is routing.Route.DROP:
            self.holds.seen(received.tp, received.offset)
            return
        self.holds.hold(received.tp, received.offset, eid)
        if route is routing.Route.DELIVER:
            self.sessions[eid].inbox.put_nowait(action)
        else:
            self.early_actions.add(action, received.partition, time.monotonic())

    async def _run_episode(self, session: EpisodeSession) -> None:
        eid = session.episode_id
        termination = None
        try:
            async with self.slots:
                termination = await self.runner.run(session)
        except Exception:  # a bug: keep the hold, so the next owner resumes the episode
            log.exception("episode %s failed outside the browser", eid)
        finally:
            if self.sessions.get(eid) is session:  # not taken away (nor started again)
                del self.sessions[eid]
                self.tasks.pop(eid, None)
                if termination is not None:
                    self.finished.add(session.partition, [eid])
                    self.holds.release(eid)

    # -- helpers ----------------------------------------------------------------

    async def _know_who_ended(self, received: Received) -> None:
        """Read which episodes of the record's partition ended, if not read far enough back."""
        generation = self.generation
        await self.finished.read_as_needed(
            self.completed, received.partition, received.timestamp_ms,
            int(self.cfg.finished_lookback_s * 1000),
            self.settings.kafka.request_timeout_ms / 1000 * 4,
            still_owned=lambda: generation == self.generation,
        )

    async def _skip(self, tp: TopicPartition, offset: int) -> None:
        self.holds.seen(tp, offset)  # dead-lettered: committed with its neighbours

    def _browser_lost(self, reason: str) -> None:
        for session in list(self.sessions.values()):
            if session.context is not None:
                session.crashed = reason
                session.stop("crashed", reason)

    def _on_cancel(self, event: CancelEpisode) -> None:
        if event.episode_id in self.sessions:
            self.sessions[event.episode_id].stop("cancelled", event.reason)
        else:  # its request may still come
            routing.remember(self.cancelled, event.episode_id, event.reason)

    async def _drop_stale_early_actions(self) -> None:
        ttl = self.settings.browser.pending_action_ttl_s
        while True:
            await asyncio.sleep(min(5.0, ttl))
            for eid in self.early_actions.stale(time.monotonic(), ttl):
                log.info("dropping actions of %s: its request never came", eid)
                self.early_actions.drop(eid)
                self.holds.release(eid)

    async def _report_contexts(self) -> None:
        """Log Chromium's count of open contexts whenever it changes (checked every
        CONTEXTS_EVERY_S): what a leak would show, and what the env server's test reads."""
        last: int | None = None
        while True:
            await asyncio.sleep(CONTEXTS_EVERY_S)
            count = await self.pool.open_contexts()
            if count is not None and count != last:
                log.info("open contexts: %d (episodes here: %d)", count, len(self.sessions))
                last = count

    async def _revoke(self, partitions: set[TopicPartition]) -> None:
        """Stop the episodes of `partitions` now; their next owner resumes them from the log."""
        self.generation += 1
        numbers = {tp.partition for tp in partitions}
        taken = routing.on_partitions(self.sessions, numbers)
        tasks = [self.tasks.pop(eid) for eid in taken if eid in self.tasks]
        for eid in taken:
            del self.sessions[eid]
        for task in tasks:
            task.cancel()
        timeout = self.cfg.revoke_timeout_s
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=timeout)
            if late:
                log.warning("%d episodes did not stop within %.0f s", len(late), timeout)
        if taken:
            log.info("handed over %d episodes: %s", len(taken), ", ".join(taken))
        # What the cancelled episodes sent must be in the log before the next owner reads
        # which episodes ended; offsets below every hold may be committed, none above.
        if not await best_effort(self.producer.producer.flush(), timeout, "flushing"):
            log.warning("some events may reach the log after the partitions moved")
        await best_effort(commit_held(self.holds, self.consumer.consumer, partitions), timeout,
                      "committing before the partitions move")
        self.holds.forget(partitions)
        self.finished.forget(numbers)
        for eid in self.early_actions.on_partitions(numbers):
            self.early_actions.drop(eid)

    # -- ConsumerRebalanceListener ----------------------------------------------

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._revoke(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.generation += 1
        log.info("worker %s now owns %s", self.worker_id, sorted(
            f"{tp.topic}[{tp.partition}]" for tp in assigned))
        if not self.ready:  # in the group, even with no partition: serving
            self.ready = True
            mark_ready(f"browser worker {self.worker_id} joined its group")


async def run_browser_worker(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT, then hand in-flight episodes over and leave the group."""
    await run_until_signalled(BrowserWorker(settings).run())
