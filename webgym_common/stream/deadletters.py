"""The dead-letter topic's records: making one, and knowing which poison has one already.

Delivery semantics: a letter is published at least once per record and group; a restart's
re-delivery of a record its group had dead-lettered finds the letter (LetterIndex) and
writes none, so the DLQ holds poison, not the normal re-deliveries of a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Protocol

from aiokafka import TopicPartition

from webgym_common.codec import Codec, DecodeError
from webgym_common.config import Settings
from webgym_common.events import DeadLetter
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.topics import Topic, topic_name

log = logging.getLogger(__name__)


class SourceRecord(Protocol):
    """Where a message came from: an aiokafka ConsumerRecord or a faust Message."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


@dataclass(frozen=True)
class RawRecord:
    """A SourceRecord made from a decoded event (to dead-letter what decoded but is refused)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


# What a dead letter keeps of the poison: enough to see what it was, small enough to publish.
DEAD_LETTER_RAW_BYTES = 256 * 1024


@dataclass(frozen=True)
class Letter:
    """A dead letter as people read it (the monitor's DLQ page, the chaos verdicts): where
    it came from, why, and who refused it — not its bytes."""

    source_topic: str
    source_partition: int
    source_offset: int
    error: str
    consumer_group: str | None
    size: int
    produced_at: str

    @classmethod
    def of(cls, letter: DeadLetter) -> Letter:
        return cls(letter.source_topic, letter.source_partition, letter.source_offset,
                   letter.error, letter.consumer_group, len(letter.raw_value),
                   letter.produced_at.isoformat())


def dead_letter(record: SourceRecord, error: str, group_id: str | None) -> DeadLetter:
    """The DLQ's record of a message nobody could handle; publish it keyed by its source topic.

    The one place a dead letter is made (and logged), for the bus and the faust apps.
    """
    log.warning(
        "dead-lettered %s[%d]@%d: %s", record.topic, record.partition, record.offset, error
    )
    raw = record.value or b""
    if len(raw) > DEAD_LETTER_RAW_BYTES:
        error = f"{error} [raw value cut to its first {DEAD_LETTER_RAW_BYTES} of {len(raw)} bytes]"
        raw = raw[:DEAD_LETTER_RAW_BYTES]
    return DeadLetter(
        source_topic=record.topic,
        source_partition=record.partition,
        source_offset=record.offset,
        source_key=record.key,
        raw_value=raw,
        error=error,
        consumer_group=group_id,
    )


Source = tuple[str, int, int]  # (topic, partition, offset) of a record


async def dead_letter_index(settings: Settings, codec: Codec,
                            timeout_s: float) -> dict[Source, set[str | None]]:
    """Which records the DLQ holds letters for, and from which groups (None: no group)."""
    name = topic_name(settings.kafka, Topic.DLQ)
    consumer = make_consumer(settings, [], None, client_id="dlq-index")
    index: dict[Source, set[str | None]] = {}
    await asyncio.wait_for(consumer.start(), timeout_s)
    try:
        async with asyncio.timeout(timeout_s):
            while not (numbers := consumer.partitions_for_topic(name)):
                await consumer._client.force_metadata_update()
                await asyncio.sleep(0.1)
            parts = [TopicPartition(name, p) for p in sorted(numbers)]
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            ends = await consumer.end_offsets(parts)
            while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=300)).values():
                    for r in records:
                        try:
                            letter = codec.decode(r.value)
                        except DecodeError:
                            continue
                        if isinstance(letter, DeadLetter):
                            index.setdefault((letter.source_topic, letter.source_partition,
                                              letter.source_offset), set()).add(
                                letter.consumer_group)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(consumer.stop(), timeout_s)
    return index


class LetterIndex:
    """Whether a poison still needs its letter, for one group (None: a reader without one).

    A restart reads again what its group had not committed, and a reader without a group
    reads every record at every start: those re-deliveries are not new poison. A group
    writes one letter per record; a reader without a group none when any reader wrote one.
    The DLQ is read once, at the first poison; if it cannot be, the letter is written (twice
    rather than never).
    """

    def __init__(self, settings: Settings, codec: Codec, group_id: str | None) -> None:
        self.settings, self.codec, self.group_id = settings, codec, group_id
        self.letters: dict[Source, set[str | None]] | None = None

    async def first(self, topic: str, partition: int, offset: int) -> bool:
        if self.letters is None:
            try:
                self.letters = await dead_letter_index(
                    self.settings, self.codec, self.settings.kafka.request_timeout_ms / 1000)
            except Exception as err:
                log.warning("cannot read the DLQ to skip letters written before: %r", err)
                return True
        groups = self.letters.setdefault((topic, partition, offset), set())
        if self.group_id in groups or (self.group_id is None and groups):
            log.info("%s[%d]@%d has its dead letter already", topic, partition, offset)
            return False
        groups.add(self.group_id)
        return True
