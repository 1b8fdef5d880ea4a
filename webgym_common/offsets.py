"""Which offsets a browser worker may commit.

An episode's request and every action it has received stay uncommitted until the
episode is over, so whoever owns the partition next (after a crash or a
rebalance) re-reads them and resumes the episode by replaying its actions.
"""

from __future__ import annotations

from collections import defaultdict

from aiokafka import TopicPartition


class OffsetHolds:
    def __init__(self) -> None:
        self.next_offset: dict[TopicPartition, int] = {}
        self.holds: dict[TopicPartition, dict[str, int]] = defaultdict(dict)
        self.committed: dict[TopicPartition, int] = {}

    def seen(self, tp: TopicPartition, offset: int) -> None:
        self.next_offset[tp] = max(self.next_offset.get(tp, 0), offset + 1)

    def hold(self, tp: TopicPartition, offset: int, episode_id: str) -> None:
        """Keep `offset` (and everything after it) on `tp` until `episode_id` is released."""
        self.seen(tp, offset)
        current = self.holds[tp].get(episode_id)
        self.holds[tp][episode_id] = offset if current is None else min(current, offset)

    def release(self, episode_id: str) -> None:
        for held in self.holds.values():
            held.pop(episode_id, None)

    def committable(self) -> dict[TopicPartition, int]:
        """Offsets that moved forward since the last call, one per partition."""
        out = {}
        for tp, nxt in self.next_offset.items():
            held = self.holds.get(tp)
            safe = min(held.values()) if held else nxt
            if safe > self.committed.get(tp, -1):
                out[tp] = safe
        return out

    def mark_committed(self, offsets: dict[TopicPartition, int]) -> None:
        self.committed.update(offsets)

    def forget(self, partitions: set[TopicPartition]) -> None:
        for tp in partitions:
            self.next_offset.pop(tp, None)
            self.holds.pop(tp, None)
            self.committed.pop(tp, None)
