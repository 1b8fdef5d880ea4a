"""The replay processor: scored episodes in, one ReplaySample per training-eligible step out.

Delivery: at-least-once in, at-least-once out under deterministic ids. Consume
EpisodeScored (webgym.episodes.scored) in the replay group, keep the steps WebGym would
train on (processors.replay_buffer.decisions), fetch each one's stored prompt from the object
store and publish a ReplaySample keyed by its sample_id (episode:step) to webgym.replay;
the scored offset is committed, in order, only after every sample of the episode is
published. A crash between the publish and the commit publishes the episode's samples
again after the restart, under the same ids: readers deduplicate by sample_id (the
contract). Within one run an episode already replayed (redelivered after a rebalance,
or scored twice) is not published again.

Nothing is skipped because a dependency is down: MinIO or Kafka failing is retried with
backoff until it answers. What can never be handled goes to the DLQ with the reason and
the fold goes on: bytes that do not decode (the bus does that) and a prompt blob that is
missing or is not chat messages (one dead letter for the episode, naming the steps; its
other steps are still published). A commit that fails or hangs is logged and the fold
goes on: the offset goes with a later commit, or the episode comes again (same ids).

Nothing held out trains: before its steps are kept, the episode's task is put to the leak
guard (webgym_common.leaks) built from the task catalog (webgym.tasks, read when the first
episode comes and again, at most every CATALOG_REREAD_S, when one names a task it does not
know yet). A task the guard refuses, or one the catalog still does not know after that read,
gives no samples (logged, not dead-lettered: the event is sound, its task may not train).

No state of its own: each episode is decided alone, so workers share partitions freely.
The handler (`Replayer.replay`: the episode and whether this run replayed it in, effects
out) decides; webgym_common.stream.handlers.handle_each publishes, dead-letters, remembers
and commits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import urllib3
from aiokafka.errors import KafkaError
from minio.error import S3Error

from processors.replay_buffer.decisions import KeptStep, replay_sample, training_steps
from webgym_common.config import ReplaySettings, Settings
from webgym_common.events import EpisodeScored, ReplaySample, Task
from webgym_common.leaks import LeakGuard
from webgym_common.lifecycle import run_until_signalled
from webgym_common.objectstore import (
    MISSING,
    BlobMismatch,
    ObjectStore,
    ObjectStoreError,
    parse_uri,
)
from webgym_common.replay_prompts import BlobReader, PromptError, chat_messages
from webgym_common.stream import handlers
from webgym_common.stream.bus import EventConsumer, EventProducer, Ownership
from webgym_common.stream.handlers import NOTHING, Effects, Memory, Origin, Publish, handle_each
from webgym_common.stream.readers import read_compacted
from webgym_common.topics import Group, Topic, group_id

log = logging.getLogger(__name__)
T = TypeVar("T")

REMEMBERED = 100_000  # episodes replayed in this run: redeliveries of them are skipped
CATALOG_REREAD_S = 5.0  # an unknown task reads the catalog again, at most this often


def transient(err: BaseException) -> bool:
    """A dependency down or slow (try again), not a blob that is not there or not intact."""
    if isinstance(err, BlobMismatch):
        return False
    if isinstance(err, S3Error):
        return err.code not in MISSING
    return isinstance(err, (KafkaError, ObjectStoreError, TimeoutError, OSError,
                            urllib3.exceptions.HTTPError))


async def persistently(what: str, call: Callable[[], Awaitable[T]]) -> T:
    """`call` until it stops failing for a passing reason (see `transient`)."""
    return await handlers.persistently(f"replay: {what}", call, transient)


class Catalog(Protocol):
    async def guard_for(self, task_id: str) -> LeakGuard: ...


class TopicCatalog:
    """The leak guard over webgym.tasks, read again when a task is new to it."""

    def __init__(self, settings: Settings, producer: EventProducer) -> None:
        self.settings, self.producer = settings, producer
        self.guard, self.read_at = LeakGuard.of([]), float("-inf")

    async def guard_for(self, task_id: str) -> LeakGuard:
        """The guard, read again first when it does not know `task_id` (a task loaded after
        the last read), at most every CATALOG_REREAD_S: an unknown task waits for the next
        read rather than being judged on a stale catalog."""
        if task_id not in self.guard.catalog:
            await asyncio.sleep(max(0.0, self.read_at + CATALOG_REREAD_S - time.monotonic()))
            table = await persistently("reading webgym.tasks", lambda: read_compacted(
                self.settings, Topic.TASKS, self.producer))
            self.guard = LeakGuard.of([v for v in table.values() if isinstance(v, Task)])
            self.read_at = time.monotonic()
        return self.guard


class Replayer:
    def __init__(self, cfg: ReplaySettings, store: BlobReader, catalog: Catalog) -> None:
        self.cfg, self.store, self.catalog = cfg, store, catalog

    async def replay(self, scored: EpisodeScored, replayed: bool | None,
                     origin: Origin) -> Effects[bool]:
        """The episode's samples to publish (and a dead letter for steps that cannot be)."""
        if replayed:
            log.info("replay: episode %s replayed already in this run", scored.episode_id)
            return NOTHING
        kept = training_steps(scored, self.cfg)
        if kept and (leaks := (await self.catalog.guard_for(scored.task_id)).reasons(
                scored.task_id)):
            log.warning("replay %s: none of its %d steps kept, its task may not train: %s",
                        scored.episode_id, len(kept), "; ".join(leaks))
            return Effects(state=True)
        made = await asyncio.gather(*(self.sample(scored, k) for k in kept))
        samples = [s for s in made if isinstance(s, ReplaySample)]
        problems = [p for p in made if isinstance(p, str)]
        log.info("replay %s (reward %.2f): %d of %d steps kept, %d samples to publish",
                 scored.episode_id, scored.reward, len(kept), len(scored.trajectory),
                 len(samples))
        return Effects([Publish(Topic.REPLAY, s.sample_id, s) for s in samples], True,
                       "; ".join(problems) or None)

    async def sample(self, scored: EpisodeScored, kept: KeptStep) -> ReplaySample | str:
        """The step's sample, or why it cannot be made (for the dead letter)."""
        uri = kept.prompt_uri
        try:
            parse_uri(uri)
            # Verified against its key: an altered prompt is dead-lettered, never trained on.
            blob = await persistently(f"fetching {uri}", lambda: self.store.get_blob(uri))
            return replay_sample(scored, kept, chat_messages(blob, kept.screenshot_uri))
        except S3Error as err:
            return f"step {kept.step}: prompt {uri} is missing ({err.code})"
        except (PromptError, ObjectStoreError) as err:
            return f"step {kept.step}: prompt {uri} is unusable: {err}"


async def replay_scored_episodes(settings: Settings) -> None:
    group = group_id(settings.kafka, Group.REPLAY)
    async with EventProducer(settings, client_id="replay") as producer:
        consumer = EventConsumer(settings, [Topic.EPISODES_SCORED], group, producer,
                                 client_id="replay", listener=Ownership("replay"))
        async with consumer:
            replayer = Replayer(settings.replay, ObjectStore(settings.s3),
                                TopicCatalog(settings, producer))
            await handle_each(consumer, producer, EpisodeScored, lambda s: s.episode_id,
                              replayer.replay, Memory(bound=REMEMBERED),
                              settings.kafka.request_timeout_ms / 1000)


async def run_replay_worker(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT; leaving the group on the way out speeds up a rebalance."""
    await run_until_signalled(replay_scored_episodes(settings))
