"""Which offsets a consumer may commit: never past a record whose handling is not finished.

The one in-order commit rule of the project, for every consumer (the bus's
EventConsumer, the faust apps' in-order acks, the browser worker): a partition is
committed only up to the lowest offset still held, however the handling of its
records interleaves (several actors, a dead letter in the middle of a batch, an
episode that keeps its request until it ends). Committing offset n means "read
again from n", so whoever owns the partition next (after a crash or a rebalance)
re-reads every record that was not finished.

A record is either `seen` (nothing keeps it: handled, dead-lettered, or ignored) or
held by an owner until `release(owner)`: the browser holds an episode's request and
actions under the episode's id; `begin`/`finish` hold one record for its own handling.
"""

from __future__ import annotations

import heapq
import itertools
from collections import defaultdict
from collections.abc import Hashable

from aiokafka import TopicPartition


class OffsetHolds:
    def __init__(self) -> None:
        self.next_offset: dict[TopicPartition, int] = {}
        self.holds: dict[TopicPartition, dict[Hashable, int]] = defaultdict(dict)
        self.committed: dict[TopicPartition, int] = {}
        self._owners: dict[Hashable, set[TopicPartition]] = defaultdict(set)
        # Per partition, a heap of (offset, n, owner); entries whose hold moved or ended
        # are dropped lazily, so finding the lowest hold stays cheap with many holds.
        self._lowest: dict[TopicPartition, list[tuple[int, int, Hashable]]] = defaultdict(list)
        self._n = itertools.count()

    def seen(self, tp: TopicPartition, offset: int) -> None:
        self.next_offset[tp] = max(self.next_offset.get(tp, 0), offset + 1)

    def hold(self, tp: TopicPartition, offset: int, owner: Hashable) -> None:
        """Keep `offset` (and everything after it) on `tp` until `owner` is released."""
        self.seen(tp, offset)
        current = self.holds[tp].get(owner)
        if current is None or offset < current:
            self.holds[tp][owner] = offset
            self._owners[owner].add(tp)
            heapq.heappush(self._lowest[tp], (offset, next(self._n), owner))

    def release(self, owner: Hashable) -> None:
        for tp in self._owners.pop(owner, ()):
            held = self.holds.get(tp)
            if held is not None:
                held.pop(owner, None)

    def begin(self, tp: TopicPartition, offset: int) -> None:
        """The record at `offset` is being handled: hold it until `finish`."""
        self.hold(tp, offset, (tp, offset))

    def finish(self, tp: TopicPartition, offset: int) -> None:
        """The record at `offset` is handled (its effects are published)."""
        self.release((tp, offset))

    def safe_offset(self, tp: TopicPartition) -> int | None:
        """The offset a commit of `tp` may name now: the lowest held, else the next unread."""
        held, heap = self.holds.get(tp), self._lowest.get(tp)
        while heap:
            offset, _, owner = heap[0]
            if held is not None and held.get(owner) == offset:
                return offset
            heapq.heappop(heap)  # released, or held lower since
        return self.next_offset.get(tp)

    def committable(self) -> dict[TopicPartition, int]:
        """Offsets that moved forward since the last call, one per partition."""
        out = {}
        for tp in self.next_offset:
            safe = self.safe_offset(tp)
            if safe is not None and safe > self.committed.get(tp, -1):
                out[tp] = safe
        return out

    def mark_committed(self, offsets: dict[TopicPartition, int]) -> None:
        self.committed.update(offsets)

    def forget(self, partitions: set[TopicPartition]) -> None:
        """Partitions that moved away: their next owner commits them (from what it reads)."""
        for tp in partitions:
            self.next_offset.pop(tp, None)
            for owner in self.holds.pop(tp, {}):
                owners = self._owners.get(owner)
                if owners is not None:
                    owners.discard(tp)
                    if not owners:
                        del self._owners[owner]
            self._lowest.pop(tp, None)
            self.committed.pop(tp, None)
