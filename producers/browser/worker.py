"""A browser worker process: consume episodes and actions, run episodes, publish steps.

Delivery: at-least-once, and an episode survives a change of owner. One consumer
group over webgym.episodes and webgym.actions (co-partitioned by episode id), so
the worker that owns an episode also receives its actions. Episodes whose
partitions move away are handed over: their offsets were never committed, so the
next owner re-reads the request and the actions and resumes the episode by
replaying them (duplicate StepObserved events for already observed steps are
expected; consumers key them by (episode_id, step)). Where each record goes is
decided in routing.py, what may be committed in offsets.py.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from producers.browser.episode import HANDOVER, EpisodeRunner
from producers.browser.session import EpisodeSession
from webgym_common.bus import EventConsumer, EventProducer, Received
from webgym_common.config import Settings
from webgym_common.events import ActionChosen, CancelEpisode, EpisodeRequested
from webgym_common.lifecycle import mark_ready, run_until_signalled
from webgym_common.objectstore import ObjectStore
from webgym_common.offsets import OffsetHolds
from webgym_common.topics import Group, Topic, group_id

log = logging.getLogger(__name__)


class BrowserWorker(ConsumerRebalanceListener):
    def __init__(self, settings: Settings, worker_id: str | None = None) -> None:
        self.settings = settings
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.producer = EventProducer(settings, client_id=f"browser-{self.worker_id}")
        self.consumer = EventConsumer(
            settings, [Topic.EPISODES, Topic.ACTIONS], group_id(settings.kafka, Group.BROWSERS),
            self.producer, client_id=f"browser-{self.worker_id}", listener=self,
        )
        self.consumer.on_skip = self._skip
        self.store = ObjectStore(settings.s3)
        self.pool = BrowserPool(settings.browser, self._browser_lost)
        self.runner = EpisodeRunner(settings, self.pool, self.producer, self.store, self.worker_id)
        self.slots = asyncio.Semaphore(settings.browser.contexts)
        self.holds = OffsetHolds()
        self.sessions: dict[str, EpisodeSession] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        self.finished: OrderedDict[str, None] = OrderedDict()
        self.cancelled: OrderedDict[str, str] = OrderedDict()
        self.early_actions = routing.EarlyActions()
        self.completed_count = 0
        self.ready = False

    # -- the story --------------------------------------------------------------

    async def run(self) -> None:
        await self.store.ensure_bucket()
        await self.pool.start()
        await self.producer.start()
        await self.consumer.start()
        helpers = [
            asyncio.create_task(commit_every(0.5, self.holds, self.consumer.consumer)),
            asyncio.create_task(follow_cancels(self.settings, self.producer, self._on_cancel)),
            asyncio.create_task(self._drop_stale_early_actions()),
        ]
        log.info("browser worker %s: %d contexts, chromium %s", self.worker_id,
                 self.settings.browser.contexts, self.pool.version)
        try:
            async for received in self.consumer.events(poll_timeout_ms=200):
                event = received.event
                if isinstance(event, EpisodeRequested):
                    self._on_request(received, event)
                elif isinstance(event, ActionChosen):
                    self._on_action(received, event)
                else:
                    self.holds.seen(received.tp, received.offset)
        finally:
            self.pool.stopping()
            for task in helpers:
                task.cancel()
            await self._hand_over(set(self.consumer.consumer.assignment()))
            await self.consumer.stop()
            await self.producer.stop()
            await self.pool.stop()

    def _on_request(self, received: Received, request: EpisodeRequested) -> None:
        eid = request.episode_id
        if not routing.starts_episode(eid, self.finished, self.sessions):
            self.holds.seen(received.tp, received.offset)
            return
        self.holds.hold(received.tp, received.offset, eid)
        session = EpisodeSession(request, received.partition)
        self.sessions[eid] = session
        for action in self.early_actions.take(eid):
            session.inbox.put_nowait(action)
        if eid in self.cancelled:
            session.abort("cancelled", self.cancelled[eid])
        self.tasks[eid] = asyncio.create_task(self._run_episode(session))

    def _on_action(self, received: Received, action: ActionChosen) -> None:
        eid = action.episode_id
        route = routing.route_action(eid, self.finished, self.sessions)
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
        termination = HANDOVER
        try:
            async with self.slots:
                termination = await self.runner.run(session)
        except Exception:
            log.exception("episode %s failed outside the browser", eid)
        finally:
            self.sessions.pop(eid, None)
            self.tasks.pop(eid, None)
            if termination != HANDOVER:
                routing.remember(self.finished, eid, None)
                self.holds.release(eid)
                self.completed_count += 1

    # -- helpers ----------------------------------------------------------------

    async def _skip(self, tp: TopicPartition, offset: int) -> None:
        self.holds.seen(tp, offset)  # dead-lettered: committed with its neighbours

    def _browser_lost(self, reason: str) -> None:
        for session in list(self.sessions.values()):
            if session.context is not None:
                session.crashed = reason
                session.abort("crashed", reason)

    def _on_cancel(self, event: CancelEpisode) -> None:
        if event.episode_id in self.sessions:
            self.sessions[event.episode_id].abort("cancelled", event.reason)
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

    async def _hand_over(self, partitions: set[TopicPartition]) -> None:
        numbers = {tp.partition for tp in partitions}
        moving = [self.sessions[e] for e in routing.on_partitions(self.sessions, numbers)]
        for session in moving:
            session.abort(HANDOVER, "partition reassigned")
        tasks = [self.tasks[s.episode_id] for s in moving if s.episode_id in self.tasks]
        if tasks:
            await asyncio.wait(tasks, timeout=30)
        with contextlib.suppress(Exception):
            await commit_held(self.holds, self.consumer.consumer, partitions)
        self.holds.forget(partitions)
        for eid in self.early_actions.on_partitions(numbers):
            self.early_actions.drop(eid)

    # -- ConsumerRebalanceListener ----------------------------------------------

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if revoked:
            await self._hand_over(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info("worker %s now owns %s", self.worker_id, sorted(
            f"{tp.topic}[{tp.partition}]" for tp in assigned))
        if not self.ready:  # in the group, even with no partition: serving
            self.ready = True
            mark_ready(f"browser worker {self.worker_id} joined its group")


async def run_browser_worker(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT, then hand in-flight episodes over and leave the group."""
    await run_until_signalled(BrowserWorker(settings).run())
