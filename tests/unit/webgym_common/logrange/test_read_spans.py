"""Reading spans (webgym_common.logrange.bounds.read_spans): each partition from its start
to its end, no seek where the consumer stands already (a seek drops what it prefetched)."""

from __future__ import annotations

from typing import Any, cast

from aiokafka import TopicPartition

from tests.factories import sample_event
from webgym_common.logrange.bounds import read_spans
from webgym_common.stream.bus import EventConsumer, Received

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
EVENT = sample_event("EpisodeCompleted")


class FakeKafka:
    def __init__(self, positions: dict[TopicPartition, int], ends: dict[TopicPartition, int]):
        self.positions, self.ends = dict(positions), ends
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.paused_: set[TopicPartition] = set()

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))
        self.positions[tp] = offset

    async def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    def pause(self, *tps: TopicPartition) -> None:
        self.paused_.update(tps)

    def paused(self) -> set[TopicPartition]:
        return self.paused_


class FakeReader:
    topic_names = ["t"]

    def __init__(self, kafka: FakeKafka) -> None:
        self.consumer = kafka

    async def poll(self, timeout_ms: int = 500) -> list[Received]:
        """Two records a partition a poll, past the span's end too (a fetch does that)."""
        out = []
        for tp, at in self.consumer.positions.items():
            if tp in self.consumer.paused_:
                continue
            for offset in range(at, min(at + 2, self.consumer.ends[tp])):
                out.append(Received(tp.topic, tp.partition, offset, None, EVENT, 0))
            self.consumer.positions[tp] = min(at + 2, self.consumer.ends[tp])
        return out


async def test_a_partition_is_sought_only_when_it_stands_elsewhere() -> None:
    kafka = FakeKafka({A: 0, B: 0}, {A: 10, B: 10})
    reader = cast(EventConsumer, cast(Any, FakeReader(kafka)))
    got = [(r.partition, r.offset) async for batch in read_spans(reader, {A: (0, 3), B: (4, 7)})
           for r in batch]
    assert kafka.seeks == [(B, 4)]
    assert sorted(got) == [(0, 0), (0, 1), (0, 2), (1, 4), (1, 5), (1, 6)]
