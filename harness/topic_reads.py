"""Reading what a chaos run left: its topics, with a plain consumer (no group, so nothing is
committed and nothing dead-lettered) that reads committed records only, as every consumer
of the pipeline does, and the sandbox's per-episode post counter.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition

from infra.sandbox.posts import POSTS_PATH, reference_posts
from processors.replay_buffer.decisions import sample_id, training_steps
from tests.chaos.outcomes import Completion, Observed
from tests.chaos.scenario import Options, all_tasks
from webgym_common.codec import Codec, DecodeError
from webgym_common.config import Settings
from webgym_common.events import (
    DeadLetter,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    IterationStarted,
    ReplaySample,
    RolloutMetrics,
    TaskHistory,
)
from webgym_common.stream.deadletters import Letter
from webgym_common.topics import Topic, topic_name


def raw_consumer(settings: Settings, client_id: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers, client_id=client_id,
        group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
        # What every consumer of the pipeline sees: an aborted transaction's records
        # (a killed processor's half-done work) are not outcomes.
        isolation_level="read_committed", request_timeout_ms=15_000,
        fetch_max_bytes=64 * 1024 * 1024, max_partition_fetch_bytes=16 * 1024 * 1024)


async def wait_partitions(consumer: AIOKafkaConsumer, name: str,
                          timeout_s: float = 60) -> list[TopicPartition]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        parts = consumer.partitions_for_topic(name)
        if parts:
            return [TopicPartition(name, p) for p in sorted(parts)]
        await consumer._client.force_metadata_update()
        await asyncio.sleep(0.3)
    raise LookupError(f"topic {name} not found")


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


async def read_topic(settings: Settings, topic: Topic, timeout_s: float = 60) -> list[Record]:
    """Every record of a topic up to its end offsets as of now (bounded)."""
    name = topic_name(settings.kafka, topic)
    consumer = raw_consumer(settings, "chaos-reader")
    await asyncio.wait_for(consumer.start(), timeout_s)
    out: list[Record] = []
    try:
        async with asyncio.timeout(timeout_s):
            parts = await wait_partitions(consumer, name)
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            ends = await consumer.end_offsets(parts)
            while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=300)).values():
                    out += [Record(r.topic, r.partition, r.offset, r.key, r.value)
                            for r in records if r.offset < ends[TopicPartition(r.topic,
                                                                               r.partition)]]
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(consumer.stop(), 10)
    return out


async def read_events(settings: Settings, topic: Topic, skip: set[tuple[str, int, int]]) -> list:
    codec = Codec()
    events = []
    for r in await read_topic(settings, topic):
        if (r.topic, r.partition, r.offset) in skip:
            continue
        with contextlib.suppress(DecodeError):
            events.append(codec.decode(r.value))
    return events


async def sandbox_posts(settings: Settings) -> tuple[dict[str, int], dict[str, int]] | None:
    """The sandbox's form posts per episode, and its re-run ones (None: it cannot say)."""
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            resp = await client.get(settings.sandbox_url + POSTS_PATH)
        body = resp.json() if resp.status_code == 200 else None
        return (dict(body["posts"]), dict(body.get("reruns", {}))) if body else None
    except (httpx.HTTPError, ValueError, KeyError):
        return None


async def observe(settings: Settings, options: Options, injected: set[tuple[str, int, int]],
                  posts_before: tuple[dict[str, int], dict[str, int]]) -> Observed:
    """What the topics (and the sandbox) hold for this run's prefix."""
    obs = Observed()
    tasks = all_tasks()
    obs.expected_posts = {t: reference_posts(tasks[t]["reference_actions"])
                          for t in options.tasks}
    for ev in await read_events(settings, Topic.CONTROL, injected):
        if isinstance(ev, IterationStarted):
            for eid in ev.episode_ids:
                obs.episode_task.setdefault(eid, eid.split("-", 3)[-1])
    for ev in await read_events(settings, Topic.EPISODES, injected):
        if isinstance(ev, EpisodeRequested):
            obs.episode_task[ev.episode_id] = ev.task.task_id
    for ev in await read_events(settings, Topic.EPISODES_COMPLETED, injected):
        if isinstance(ev, EpisodeCompleted):
            obs.completed.setdefault(ev.episode_id, []).append(
                Completion(ev.termination, ev.reason))
    if options.replay:
        obs.samples_due = {}
        for ev in await read_events(settings, Topic.REPLAY, injected):
            if isinstance(ev, ReplaySample):
                obs.samples.setdefault(ev.episode_id, []).append(ev.sample_id)
    for ev in await read_events(settings, Topic.EPISODES_SCORED, injected):
        if isinstance(ev, EpisodeScored):
            if obs.samples_due is not None and ev.episode_id not in obs.samples_due:
                obs.samples_due[ev.episode_id] = {sample_id(ev.episode_id, k.step) for k in
                                                  training_steps(ev, settings.replay)}
            obs.scored[ev.episode_id] = obs.scored.get(ev.episode_id, 0) + 1
            obs.scored_task[ev.episode_id] = ev.task_id
            obs.scored_iteration[ev.episode_id] = ev.iteration
    for ev in await read_events(settings, Topic.TASK_HISTORY, injected):
        if isinstance(ev, TaskHistory):  # later offsets are newer: the last one wins
            obs.history[ev.task_id] = (ev.attempts, list(ev.recent_episode_ids))
    for ev in await read_events(settings, Topic.METRICS, injected):
        if isinstance(ev, RolloutMetrics):
            obs.metrics_episodes[ev.iteration] = ev.episodes
    for ev in await read_events(settings, Topic.DLQ, set()):
        if isinstance(ev, DeadLetter) and (
                ev.source_topic, ev.source_partition, ev.source_offset) not in injected:
            obs.dlq.append(Letter.of(ev))
    now = await sandbox_posts(settings)
    if now is not None:
        posts, reruns = ({k: n - before.get(k, 0) for k, n in counts.items()}
                          for counts, before in zip(now, posts_before, strict=True))
        attributed = {k: n for k, n in posts.items() if k and n}
        if attributed or not posts.get(""):
            obs.posts = attributed
        obs.rerun_posts = {k: n for k, n in reruns.items() if n}
    return obs
