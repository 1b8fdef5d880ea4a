"""A browser worker process: consume episodes and actions, run episodes, publish steps.

One consumer group over webgym.episodes and webgym.actions (co-partitioned by
episode id), so the worker that owns an episode also receives its actions.
Episodes whose partitions move away are handed over: their offsets were never
committed, so the next owner re-reads the request and the actions and resumes
the episode by replaying them (duplicate StepObserved events for already
observed steps are expected; consumers key them by (episode_id, step)).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections import OrderedDict, defaultdict

from aiokafka import TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.structs import OffsetAndMetadata

from producers.browser.browser_pool import BrowserPool
from producers.browser.episode import HANDOVER, EpisodeRunner
from producers.browser.offsets import OffsetHolds
from producers.browser.session import EpisodeSession
from webgym_common.bus import EventConsumer, EventProducer, Received
from webgym_common.config import Settings
from webgym_common.events import ActionChosen, CancelEpisode, EpisodeRequested
from webgym_common.lifecycle import run_until_signalled
from webgym_common.objectstore import ObjectStore
from webgym_common.topics import Topic

log = logging.getLogger(__name__)
REMEMBERED_EPISODES = 10_000


class BrowserWorker(ConsumerRebalanceListener):
    def __init__(self, settings: Settings, worker_id: str | None = None) -> None:
        self.settings = settings
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.producer = EventProducer(settings, client_id=f"browser-{self.worker_id}")
        self.consumer = EventConsumer(
            settings, [Topic.EPISODES, Topic.ACTIONS], settings.browser.group_id, self.producer,
            client_id=f"browser-{self.worker_id}", listener=self,
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
        # Actions read before their episode's request: (arrived, partition, action).
        self.early_actions: dict[str, list[tuple[float, int, ActionChosen]]] = defaultdict(list)
        self.completed_count = 0

    # -- the story --------------------------------------------------------------

    async def run(self) -> None:
        await self.store.ensure_bucket()
        await self.pool.start()
        await self.producer.start()
        await self.consumer.start()
        helpers = [
            asyncio.create_task(self._commit_loop()),
            asyncio.create_task(self._follow_control()),
            asyncio.create_task(self._drop_stale_early_actions()),
        ]
        log.info("browser worker %s: %d contexts, chromium %s", self.worker_id,
                 self.settings.browser.contexts, self.pool.version)
        try:
            async for received in self.consumer.events(poll_timeout_ms=200):
                if isinstance(received.event, EpisodeRequested):
                    self._on_request(received)
                elif isinstance(received.event, ActionChosen):
                    self._on_action(received)
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

    def _on_request(self, received: Received) -> None:
        request: EpisodeRequested = received.event
        eid = request.episode_id
        if eid in self.finished or eid in self.sessions:
            self.holds.seen(received.tp, received.offset)
            return
        self.holds.hold(received.tp, received.offset, eid)
        session = EpisodeSession(request, received.partition)
        self.sessions[eid] = session
        for _, _, action in self.early_actions.pop(eid, []):
            session.inbox.put_nowait(action)
        if eid in self.cancelled:
            session.abort("cancelled", self.cancelled[eid])
        self.tasks[eid] = asyncio.create_task(self._run_episode(session))

    def _on_action(self, received: Received) -> None:
        action: ActionChosen = received.event
        eid = action.episode_id
        if eid in self.finished:
            self.holds.seen(received.tp, received.offset)
            return
        self.holds.hold(received.tp, received.offset, eid)
        if eid in self.sessions:
            self.sessions[eid].inbox.put_nowait(action)
        else:  # its request is further along the episodes partition
            self.early_actions[eid].append((time.monotonic(), received.partition, action))

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
                self._remember(self.finished, eid, None)
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

    async def _commit_loop(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            await self._commit()

    async def _commit(self, only: set[TopicPartition] | None = None) -> None:
        assigned = self.consumer.consumer.assignment()
        offsets = {
            tp: off for tp, off in self.holds.committable().items()
            if tp in assigned and (only is None or tp in only)
        }
        if offsets:
            await self.consumer.consumer.commit(
                {tp: OffsetAndMetadata(off, "") for tp, off in offsets.items()}
            )
            self.holds.mark_committed(offsets)

    async def _follow_control(self) -> None:
        async with EventConsumer(
            self.settings, [Topic.CONTROL], None, self.producer, client_id="browser-control"
        ) as control:
            async for received in control.events():
                event = received.event
                if not isinstance(event, CancelEpisode):
                    continue
                if event.episode_id in self.sessions:
                    self.sessions[event.episode_id].abort("cancelled", event.reason)
                else:
                    self._remember(self.cancelled, event.episode_id, event.reason)

    async def _drop_stale_early_actions(self) -> None:
        ttl = self.settings.browser.pending_action_ttl_s
        while True:
            await asyncio.sleep(min(5.0, ttl))
            now = time.monotonic()
            for eid in [e for e, acts in self.early_actions.items() if now - acts[0][0] > ttl]:
                log.info("dropping actions of %s: its request never came", eid)
                del self.early_actions[eid]
                self.holds.release(eid)

    async def _hand_over(self, partitions: set[TopicPartition]) -> None:
        numbers = {tp.partition for tp in partitions}
        moving = [s for s in self.sessions.values() if s.partition in numbers]
        for session in moving:
            session.abort(HANDOVER, "partition reassigned")
        tasks = [self.tasks[s.episode_id] for s in moving if s.episode_id in self.tasks]
        if tasks:
            await asyncio.wait(tasks, timeout=30)
        with contextlib.suppress(Exception):
            await self._commit(partitions)
        self.holds.forget(partitions)
        for eid in [e for e, acts in self.early_actions.items() if acts[0][1] in numbers]:
            del self.early_actions[eid]

    @staticmethod
    def _remember(store: OrderedDict, key: str, value: object) -> None:
        store[key] = value
        while len(store) > REMEMBERED_EPISODES:
            store.popitem(last=False)

    # -- ConsumerRebalanceListener ----------------------------------------------

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if revoked:
            await self._hand_over(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info("worker %s now owns %s", self.worker_id, sorted(
            f"{tp.topic}[{tp.partition}]" for tp in assigned))


async def run_browser_worker(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT, then hand in-flight episodes over and leave the group."""
    await run_until_signalled(BrowserWorker(settings).run())
