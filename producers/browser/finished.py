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

from webgym_common.events import EpisodeCompleted
from webgym_common.stream.readers import PartitionLog
from webgym_common.topics import Topic

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


class CompletedLog(PartitionLog):
    """Reads completed partitions from a point in time to their current end (no group)."""

    async def ended_since(self, partition: int, since_ms: int, timeout_s: float) -> list[str]:
        """Ids of the episodes completed on `partition` at or after `since_ms`."""
        return [e.episode_id for e in await self.events_since(
            Topic.EPISODES_COMPLETED, partition, since_ms, timeout_s)
            if isinstance(e, EpisodeCompleted)]
