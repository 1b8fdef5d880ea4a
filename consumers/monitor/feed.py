"""The monitor's reading: every topic from its beginning without a consumer group, and
each group's lag. Nothing here commits an offset, joins a group or publishes (not even a
dead letter: bytes that do not decode are counted and skipped), so the monitor disturbs
no consumer of the pipeline. Reads committed records only, like every consumer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from webgym_common.codec import Codec, DecodeError
from webgym_common.config import Settings
from webgym_common.events import Event
from webgym_common.stream.admin import admin_client
from webgym_common.stream.kafka_clients import make_consumer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Record:
    topic: str
    event: Event
    timestamp_ms: int


class Feed:
    """One group-less consumer over the given topics, from their beginning."""

    def __init__(self, settings: Settings, topics: Iterable[str]) -> None:
        self.settings = settings
        self.topics = list(topics)
        self.codec = Codec()
        self.undecodable = 0
        self.consumer: AIOKafkaConsumer = make_consumer(settings, [], None, "webgym-monitor")
        self.timeout_s = settings.kafka.request_timeout_ms / 1000

    async def __aenter__(self) -> Feed:
        await asyncio.wait_for(self.consumer.start(), self.timeout_s)
        parts = [TopicPartition(t, p) for t in self.topics for p in await self._partitions(t)]
        self.consumer.assign(parts)
        await asyncio.wait_for(self.consumer.seek_to_beginning(*parts), self.timeout_s)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.wait_for(self.consumer.stop(), self.timeout_s)

    async def _partitions(self, topic: str) -> list[int]:
        for _ in range(50):
            parts = self.consumer.partitions_for_topic(topic)
            if parts:
                return sorted(parts)
            await asyncio.wait_for(self.consumer._client.force_metadata_update(), self.timeout_s)
            await asyncio.sleep(0.1)
        log.warning("monitor: topic %s does not exist; not following it", topic)
        return []

    async def records(self) -> AsyncIterator[list[Record]]:
        """Batches of decoded events, forever."""
        while True:
            batches = await self.consumer.getmany(timeout_ms=200, max_records=1000)
            out = []
            for records in batches.values():
                for r in records:
                    try:
                        out.append(Record(r.topic, self.codec.decode(r.value), r.timestamp))
                    except DecodeError:
                        self.undecodable += 1  # the pipeline's processes dead-letter it
            if out:
                yield out

    async def end_offsets(self, parts: list[TopicPartition]) -> dict[TopicPartition, int]:
        return await asyncio.wait_for(self.consumer.end_offsets(parts), self.timeout_s)


def lag_by_topic(committed: dict[TopicPartition, int], ends: dict[TopicPartition, int],
                 prefix: str) -> dict[str, int]:
    """Records a group has yet to read, per topic (the prefix cut off the topic's name).

    A transactional topic's end counts its commit markers, so an idle group may show a few."""
    out: dict[str, int] = {}
    for tp, offset in committed.items():
        if tp in ends and offset >= 0:
            name = tp.topic.removeprefix(prefix + ".")
            out[name] = out.get(name, 0) + max(ends[tp] - offset, 0)
    return dict(sorted(out.items()))


async def group_lags(settings: Settings, feed: Feed) -> dict[str, dict[str, int]]:
    """Each of this prefix's consumer groups and its lag per topic (admin reads only)."""
    prefix = settings.kafka.topic_prefix
    admin = admin_client(settings)
    timeout = feed.timeout_s
    await asyncio.wait_for(admin.start(), timeout)
    try:
        groups = sorted(g[0] for g in await asyncio.wait_for(admin.list_consumer_groups(),
                                                             timeout)
                        if str(g[0]).startswith(prefix + "-"))
        out = {}
        for group in groups:
            offsets = await asyncio.wait_for(admin.list_consumer_group_offsets(group), timeout)
            committed = {tp: meta.offset for tp, meta in offsets.items()}
            ends = await feed.end_offsets(sorted(committed)) if committed else {}
            out[group.removeprefix(prefix + "-")] = lag_by_topic(committed, ends, prefix)
        return out
    finally:
        await asyncio.wait_for(admin.close(), timeout)
