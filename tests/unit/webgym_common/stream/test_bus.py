"""The bus (bus.py) without a broker: the one dead-letter builder, in-order commits."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aiokafka import ConsumerRecord, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from tests.factories import sample_event
from webgym_common.codec import Codec
from webgym_common.config import load_settings
from webgym_common.stream import bus
from webgym_common.stream.bus import EventConsumer
from webgym_common.stream.deadletters import DEAD_LETTER_RAW_BYTES, dead_letter
from webgym_common.stream.offsets import OffsetHolds


def test_a_dead_letter_keeps_the_bytes_and_where_they_came_from() -> None:
    record = ConsumerRecord(topic="p.actions", partition=3, offset=17, timestamp=0,
                            timestamp_type=0, key=b"ep-1", value=b"\x00junk", checksum=None,
                            serialized_key_size=4, serialized_value_size=5, headers=())
    letter = dead_letter(record, "not an Avro event", "p-history")
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        "p.actions", 3, 17)
    assert (letter.source_key, letter.raw_value) == (b"ep-1", b"\x00junk")
    assert (letter.error, letter.consumer_group) == ("not an Avro event", "p-history")


def test_a_tombstone_is_dead_lettered_as_empty_bytes_and_a_group_is_optional() -> None:
    record = ConsumerRecord(topic="p.tasks", partition=0, offset=0, timestamp=0,
                            timestamp_type=0, key=None, value=None, checksum=None,
                            serialized_key_size=0, serialized_value_size=0, headers=())
    letter = dead_letter(record, "empty message (tombstone or null value)", None)
    assert letter.raw_value == b"" and letter.source_key is None
    assert letter.consumer_group is None


def test_a_huge_poison_is_dead_lettered_with_a_prefix_small_enough_to_publish() -> None:
    huge = b"\xc3\x01" + b"x" * (10 * 1024 * 1024)
    record = ConsumerRecord(topic="p.actions", partition=0, offset=5, timestamp=0,
                            timestamp_type=0, key=b"ep-1", value=huge, checksum=None,
                            serialized_key_size=4, serialized_value_size=len(huge), headers=())
    letter = dead_letter(record, "too big", "p-evaluator")
    assert letter.raw_value == huge[:DEAD_LETTER_RAW_BYTES]
    cut = f"[raw value cut to its first {DEAD_LETTER_RAW_BYTES} of {len(huge)} bytes]"
    assert letter.error == f"too big {cut}"
    assert len(Codec().encode(letter)) < 2 * DEAD_LETTER_RAW_BYTES


# -- in-order commits (item 7): a dead letter never commits ahead of the events before it --


class FakeKafka:
    """Just what EventConsumer asks of an aiokafka consumer: one batch, commits, assignment."""

    def __init__(self, records: list[ConsumerRecord]) -> None:
        self.batches = [records]
        self.commits: list[dict[TopicPartition, int]] = []

    async def getmany(self, timeout_ms: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        batch = self.batches.pop(0) if self.batches else []
        return {TP: batch} if batch else {}

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.commits.append({tp: o.offset for tp, o in offsets.items()})

    def assignment(self) -> set[TopicPartition]:
        return {TP}


class FakeProducer:
    def __init__(self) -> None:
        self.codec = Codec()
        self.letters: list[int] = []

    async def dead_letter(self, record: ConsumerRecord, error: str, group: str | None) -> None:
        self.letters.append(record.offset)


TP = TopicPartition("p.episodes.scored", 0)


def record(offset: int, value: bytes) -> ConsumerRecord:
    return ConsumerRecord(topic=TP.topic, partition=0, offset=offset, timestamp=0,
                          timestamp_type=0, key=b"k", value=value, checksum=None,
                          serialized_key_size=1, serialized_value_size=len(value), headers=())


Over = Callable[..., tuple[EventConsumer, FakeKafka]]


@pytest.fixture
def consumer_over(monkeypatch: pytest.MonkeyPatch) -> Over:
    def make(records: list[ConsumerRecord], offsets: OffsetHolds | None = None
             ) -> tuple[EventConsumer, FakeKafka]:
        kafka = FakeKafka(records)
        monkeypatch.setattr(bus, "make_consumer", lambda *args: kafka)
        consumer = EventConsumer(load_settings(), [], "g", FakeProducer(),  # type: ignore[arg-type]
                                 offsets=offsets)
        consumer.letters.letters = {}  # an empty DLQ, without reading one
        return consumer, kafka

    return make


async def test_a_dead_letter_between_good_events_is_committed_only_with_them(
        consumer_over: Over) -> None:
    good = Codec().encode(sample_event("EpisodeScored"))
    consumer, kafka = consumer_over(
        [record(0, good), record(1, good), record(2, b"\x00poison"), record(3, good)])
    batch = await consumer.poll()
    assert [r.offset for r in batch] == [0, 1, 3] and consumer.dead_lettered == 1
    # The poison is in the DLQ, but 0 and 1 are not handled: a crash now must re-read them.
    assert kafka.commits == []
    await consumer.commit(batch[1])
    assert kafka.commits == []  # 0 is still being handled
    await consumer.commit(batch[0])
    assert kafka.commits == [{TP: 3}]  # 0, 1 and the dead letter at 2; 3 is still pending
    await consumer.commit(batch[2])
    assert kafka.commits == [{TP: 3}, {TP: 4}]


async def test_a_poison_after_everything_handled_is_committed_at_once(
        consumer_over: Over) -> None:
    good = Codec().encode(sample_event("EpisodeScored"))
    consumer, kafka = consumer_over([record(5, good), record(6, b"junk")])
    (first,) = await consumer.poll()
    await consumer.commit(first)
    assert kafka.commits == [{TP: 7}]  # the poison at 6 came after 5 in the same batch
    kafka.batches = [[record(7, b"junk")]]
    assert await consumer.poll() == []
    assert kafka.commits == [{TP: 7}, {TP: 8}]  # nothing pending: committed past at once


async def test_a_caller_that_tracks_its_offsets_only_sees_dead_letters_marked(
        consumer_over: Over) -> None:
    holds = OffsetHolds()
    good = Codec().encode(sample_event("EpisodeScored"))
    consumer, kafka = consumer_over([record(0, b"junk"), record(1, good)], holds)
    (received,) = await consumer.poll()
    assert kafka.commits == [] and holds.next_offset == {TP: 1} and holds.holds == {}
    holds.hold(received.tp, received.offset, "ep")  # the caller's business from here on
    assert holds.committable() == {TP: 1}
