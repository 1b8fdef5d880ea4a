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
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential

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
from webgym_common.stream.bus import (
    EventConsumer,
    EventProducer,
    Ownership,
    Received,
    commit_bounded,
)
from webgym_common.stream.readers import read_compacted
from webgym_common.topics import Group, Topic, group_id

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_MAX_S = 10.0
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
    """`call` until it stops failing for a passing reason; other failures are raised."""
    def warn(state: RetryCallState) -> None:
        err = state.outcome.exception() if state.outcome else None
        log.warning("replay: %s failed (%r); trying again in %.1f s", what, err,
                    state.upcoming_sleep)

    async for attempt in AsyncRetrying(wait=wait_exponential(multiplier=0.2, max=RETRY_MAX_S),
                                       retry=retry_if_exception(transient), before_sleep=warn,
                                       reraise=True):
        with attempt:
            return await call()
    raise AssertionError("unreachable: tenacity reraises")


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
    def __init__(self, cfg: ReplaySettings, store: BlobReader, producer: EventProducer,
                 group: str, catalog: Catalog) -> None:
        self.cfg, self.store, self.producer, self.group = cfg, store, producer, group
        self.catalog = catalog

    async def replay(self, received: Received, scored: EpisodeScored) -> int:
        """Publish the episode's samples (and a dead letter for steps that cannot be)."""
        kept = training_steps(scored, self.cfg)
        if kept and (leaks := (await self.catalog.guard_for(scored.task_id)).reasons(
                scored.task_id)):
            log.warning("replay %s: none of its %d steps kept, its task may not train: %s",
                        scored.episode_id, len(kept), "; ".join(leaks))
            return 0
        made = await asyncio.gather(*(self.sample(scored, k) for k in kept))
        samples = [s for s in made if isinstance(s, ReplaySample)]
        await asyncio.gather(*(self.publish(s) for s in samples))
        if problems := [p for p in made if isinstance(p, str)]:
            error = "; ".join(problems)
            await persistently(f"dead-lettering {scored.episode_id}",
                               lambda: self.producer.refuse(received, error, self.group))
        log.info("replay %s (reward %.2f): %d of %d steps kept, %d samples published",
                 scored.episode_id, scored.reward, len(kept), len(scored.trajectory),
                 len(samples))
        return len(samples)

    async def publish(self, sample: ReplaySample) -> None:
        await persistently(f"publishing {sample.sample_id}", lambda: self.producer.publish(
            Topic.REPLAY, sample.sample_id, sample))

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
            replayer = Replayer(settings.replay, ObjectStore(settings.s3), producer, group,
                                TopicCatalog(settings, producer))
            await replay_events(consumer, replayer, settings.kafka.request_timeout_ms / 1000)


async def replay_events(consumer: EventConsumer, replayer: Replayer,
                        commit_timeout_s: float) -> None:
    replayed: dict[str, None] = {}  # insertion-ordered: the oldest is forgotten first
    async for received in consumer.events():
        # consume: a record of a partition that moved away mid-batch is its new owner's
        if received.tp not in consumer.consumer.assignment():
            continue
        scored = received.event
        if isinstance(scored, EpisodeScored) and scored.episode_id not in replayed:
            # decide and publish
            await replayer.replay(received, scored)
            replayed[scored.episode_id] = None
            if len(replayed) > REMEMBERED:
                del replayed[next(iter(replayed))]
        elif isinstance(scored, EpisodeScored):
            log.info("replay: episode %s replayed already in this run", scored.episode_id)
        await commit_bounded(consumer, received, commit_timeout_s)


async def run_replay_worker(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT; leaving the group on the way out speeds up a rebalance."""
    await run_until_signalled(replay_scored_episodes(settings))
