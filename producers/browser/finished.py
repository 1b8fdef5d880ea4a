"""Which episodes have ended, per partition, with the log as the memory.

Delivery: webgym.episodes.completed is co-partitioned with webgym.episodes (same key,
same partition count), so the completions of the episodes on episodes partition p are
on completed partition p. A worker that owns p re-reads p's requests and actions from
the committed offset; before it handles the first of them it reads completed partition
p from a little before that record's time (a completion is always later than its
episode's request and actions), so an episode that already ended, by this worker or a
previous owner killed a moment ago, is never started again and its actions are never
executed again. What this worker completes itself is added as it happens. All of it
is forgotten with the partition: whoever owns it next reads the log again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable

from aiokafka import TopicPartition

from webgym_common.codec import Codec, DecodeError
from webgym_common.config import Settings
from webgym_common.events import EpisodeCompleted
from webgym_common.kafka_clients import make_consumer
from webgym_common.topics import Topic, topic_name

log = logging.getLogger(__name__)
# Per partition; the oldest are forgotten first (their requests are long committed).
REMEMBERED_PER_PARTITION = 100_000


class FinishedEpisodes:
    """Episode ids that ended, per partition, and from when each partition was read."""

    def __init__(self, limit: int = REMEMBERED_PER_PARTITION) -> None:
        self.limit = limit
        self.ended: dict[int, OrderedDict[str, None]] = {}
        self.read_since_ms: dict[int, int] = {}

    def of(self, partition: int) -> Collection[str]:
        return self.ended.get(partition, OrderedDict())

    def add(self, partition: int, episode_ids: Iterable[str]) -> None:
        ended = self.ended.setdefault(partition, OrderedDict())
        for eid in episode_ids:
            ended[eid] = None
            ended.move_to_end(eid)
        while len(ended) > self.limit:
            ended.popitem(last=False)

    def read_from(self, partition: int, record_ms: int, margin_ms: int) -> int | None:
        """From when completed partition `partition` must be read before a record of
        `record_ms` is handled, or None when what was read already covers it."""
        want = record_ms - margin_ms
        have = self.read_since_ms.get(partition)
        return None if have is not None and have <= want else want

    def was_read(self, partition: int, since_ms: int, episode_ids: Iterable[str]) -> None:
        self.add(partition, episode_ids)
        have = self.read_since_ms.get(partition)
        self.read_since_ms[partition] = since_ms if have is None else min(have, since_ms)

    def forget(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            self.ended.pop(p, None)
            self.read_since_ms.pop(p, None)

    async def read_as_needed(
        self, completed: CompletedLog, partition: int, record_ms: int, margin_ms: int,
        timeout_s: float, still_owned: Callable[[], bool],
    ) -> None:
        """Before a record of `record_ms` is handled, read the completions it needs.

        Retried until it succeeds (no episode of the partition may start meanwhile) or
        the partition is no longer owned as it was (`still_owned()`).
        """
        since = self.read_from(partition, record_ms, margin_ms)
        attempt = 0
        while since is not None and still_owned():
            try:
                ended = await completed.ended_since(partition, since, timeout_s)
            except Exception as err:  # Kafka away: wait for it
                attempt += 1
                log.warning("reading completions of partition %d failed (%r); retrying",
                            partition, err)
                await asyncio.sleep(min(10.0, 0.5 * attempt))
                continue
            if still_owned():
                self.was_read(partition, since, ended)
            return


class CompletedLog:
    """Reads completed partitions from a point in time to their current end (no group)."""

    def __init__(self, settings: Settings, codec: Codec, client_id: str) -> None:
        self.topic = topic_name(settings.kafka, Topic.EPISODES_COMPLETED)
        self.codec = codec
        self.consumer = make_consumer(settings, [], None, client_id)

    async def start(self) -> None:
        await self.consumer.start()

    async def stop(self) -> None:
        await self.consumer.stop()

    async def ended_since(self, partition: int, since_ms: int, timeout_s: float) -> list[str]:
        """Ids of the episodes completed on `partition` at or after `since_ms`."""
        tp = TopicPartition(self.topic, partition)
        c = self.consumer
        async with asyncio.timeout(timeout_s):
            c.assign([tp])
            found = (await c.offsets_for_times({tp: max(0, since_ms)})).get(tp)
            end = (await c.end_offsets([tp]))[tp]
            start = found.offset if found is not None else end
            ids: list[str] = []
            if start >= end:
                return ids
            c.seek(tp, start)
            while await c.position(tp) < end:
                records = (await c.getmany(tp, timeout_ms=500)).get(tp, [])
                for record in records:
                    if record.offset >= end:
                        break
                    try:
                        event = self.codec.decode(record.value)
                    except DecodeError:
                        continue  # not a completion anyone could have acted on
                    if isinstance(event, EpisodeCompleted):
                        ids.append(event.episode_id)
            return ids
