"""The Kafka side: producer/consumer factories, typed publish/consume, dead letters.

Delivery is at-least-once: a consumer commits a message's offset only after the
caller says its effects are published (`commit`), and never past a message it
returned that is not committed yet (webgym_common.stream.offsets: a partition is committed
up to the lowest unfinished offset). Bytes that do not decode go to the dead-letter
topic with the reason and count as finished; the consumer moves on.

This is how a process that folds one input into its compacted output topic (history,
metrics), and every producer and reader, talks to Kafka; processors that join several
co-partitioned inputs into table state are faust apps (webgym_common.stream.faust_app).
The clients' settings are in webgym_common.stream.kafka_clients, the dead letters (made for both,
once per record and group) in webgym_common.stream.deadletters.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import (
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from aiokafka.structs import OffsetAndMetadata

from webgym_common.codec import Codec, DecodeError
from webgym_common.config import Settings
from webgym_common.events import Event
from webgym_common.lifecycle import mark_ready
from webgym_common.stream.deadletters import LetterIndex, RawRecord, SourceRecord, dead_letter
from webgym_common.stream.kafka_clients import make_consumer, make_producer
from webgym_common.stream.offsets import OffsetHolds
from webgym_common.topics import Topic, misplaced, topic_name

log = logging.getLogger(__name__)


# How Kafka refuses a record for its size: the producer's own check against
# kafka.max_request_size (raised by send), the broker's message.max.bytes (MESSAGE_TOO_LARGE),
# a batch over the broker's segment size, a record bigger than a batch.
_TOO_LARGE = (MessageSizeTooLargeError, RecordListTooLargeError, RecordTooLargeError)


def too_large(err: BaseException) -> bool:
    """Whether Kafka refused a record for its size: not an outage, sending it again never helps."""
    return isinstance(err, _TOO_LARGE)


class EventProducer:
    """Publishes typed events; `publish` returns once the broker has the event (acks=all)."""

    def __init__(self, settings: Settings, codec: Codec | None = None, client_id: str = "webgym"):
        self.settings = settings
        self.codec = codec or Codec()
        self.producer = make_producer(settings, client_id)

    async def start(self) -> None:
        await self.producer.start()

    async def stop(self) -> None:
        await self.producer.stop()

    async def __aenter__(self) -> EventProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def topic(self, topic: Topic) -> str:
        return topic_name(self.settings.kafka, topic)

    async def publish(self, topic: Topic, key: str, event: Event) -> None:
        await self.publish_raw(self.topic(topic), key.encode(), self.codec.encode(event))

    async def publish_raw(self, topic: str, key: bytes | None, value: bytes) -> None:
        timeout = self.settings.kafka.request_timeout_ms / 1000
        await asyncio.wait_for(self.producer.send_and_wait(topic, value, key=key), timeout)

    async def dead_letter(self, record: SourceRecord, error: str, group_id: str | None) -> None:
        """Send bytes nobody could handle to the DLQ, keyed by their source topic."""
        letter = dead_letter(record, error, group_id)
        await self.publish(Topic.DLQ, letter.source_topic, letter)

    async def refuse(self, received: Received, error: str, group_id: str | None) -> None:
        """Dead-letter an event that decoded but that no process may act on."""
        key = received.key.encode() if received.key is not None else None
        await self.dead_letter(
            RawRecord(received.topic, received.partition, received.offset, key,
                      self.codec.encode(received.event)), error, group_id)


@dataclass(frozen=True)
class Received:
    """A decoded event and where it came from."""

    topic: str
    partition: int
    offset: int
    key: str | None
    event: Event
    timestamp_ms: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class Ownership(ConsumerRebalanceListener):
    """A group member's partitions: logged as they come, the process marked ready the first
    time (webgym_common.lifecycle), and `stale` set so that a fold whose state depends on
    its partitions rebuilds it before its next event. Nothing is handed over on revocation:
    the processes that use it publish each effect before committing its record."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stale = True
        self.joined = False

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.stale = True
        log.info("%s worker owns %s", self.name,
                 sorted(f"{tp.topic}[{tp.partition}]" for tp in assigned))
        if not self.joined:
            self.joined = True
            mark_ready(f"{self.name} owns {len(assigned)} partitions")


class _Forget(ConsumerRebalanceListener):
    """Drops revoked partitions from the consumer's offsets, then tells the caller's listener."""

    def __init__(self, consumer: EventConsumer, inner: ConsumerRebalanceListener | None) -> None:
        self.consumer, self.inner = consumer, inner

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if self.inner is not None:
            await self.inner.on_partitions_revoked(revoked)
        if self.consumer.tracks_offsets:
            self.consumer.offsets.forget(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if self.consumer.tracks_offsets:  # start afresh from the committed offsets
            self.consumer.offsets.forget(set(assigned))
        if self.inner is not None:
            await self.inner.on_partitions_assigned(assigned)


async def partitions_of(consumer: AIOKafkaConsumer, topics: Sequence[str],
                        timeout_s: float = 5.0) -> list[TopicPartition]:
    """Every partition of `topics` (a started consumer), their metadata asked for them alone.

    A fresh client tracks no topic, and aiokafka asks a client that tracks none for the
    metadata of every topic in the cluster: on a broker that tests and benches share, some
    thousands of partitions decoded in Python, tens of ms a client. Raises LookupError for
    a topic still unknown after `timeout_s`."""
    client = consumer._client
    try:
        async with asyncio.timeout(timeout_s):
            await client.set_topics(topics)  # an update for these topics (unless known already)
            while not all(consumer.partitions_for_topic(t) for t in topics):
                await asyncio.sleep(0.1)  # just created: its metadata is on the way
                await client.force_metadata_update()
    except TimeoutError:
        missing = [t for t in topics if not consumer.partitions_for_topic(t)]
        raise LookupError(f"topic(s) {', '.join(missing)} do not exist "
                          "(run `webgym topics create`)") from None
    return [TopicPartition(t, p) for t in topics
            for p in sorted(consumer.partitions_for_topic(t) or ())]


class EventConsumer:
    """Consumes typed events from one or more topics in one group.

    Commits are in order: `commit(received)` finishes that event and commits each
    partition up to the lowest event returned and not yet committed. Undecodable
    messages are dead-lettered and count as finished, so they are committed with
    their neighbours and never ahead of them.

    A caller that tracks its offsets itself (the browser worker holds records per
    episode) passes its own `offsets`: the consumer then only marks dead letters in
    them as seen, and the caller commits.
    """

    def __init__(
        self,
        settings: Settings,
        topics: Iterable[Topic | str],
        group_id: str | None,
        producer: EventProducer,
        codec: Codec | None = None,
        client_id: str = "webgym",
        listener: ConsumerRebalanceListener | None = None,
        offsets: OffsetHolds | None = None,
        any_type: bool = False,
    ):
        """`any_type`: yield events of any type (a generic reader); otherwise an event whose
        type its topic does not carry is dead-lettered, as undecodable bytes are."""
        self.any_type = any_type
        self.settings = settings
        self.group_id = group_id
        self.producer = producer
        self.codec = codec or producer.codec
        # A Topic is the registry's; a plain string names a topic outside it (webgym reprocess's
        # derived topics), in full.
        self.topic_names = [topic_name(settings.kafka, t) if isinstance(t, Topic) else t
                            for t in topics]
        self.consumer = make_consumer(settings, [], group_id, client_id)
        self.listener = _Forget(self, listener)
        self.dead_lettered = 0
        self.letters = LetterIndex(settings, self.codec, group_id)
        # Ours: every record returned is held until `commit`; the caller's: it marks them.
        self.offsets = offsets or OffsetHolds()
        self.tracks_offsets = offsets is None and group_id is not None
        self._on_skip: Callable[[TopicPartition, int], Awaitable[None]] | None = None

    @property
    def on_skip(self) -> Callable[[TopicPartition, int], Awaitable[None]]:
        """What to do with the offset of a dead-lettered message (default: finished, in line)."""
        return self._on_skip or self._skip

    @on_skip.setter
    def on_skip(self, hook: Callable[[TopicPartition, int], Awaitable[None]]) -> None:
        # A caller with its own hook tracks offsets itself (the old way to say `offsets=`).
        self._on_skip = hook
        self.tracks_offsets = False

    async def _skip(self, tp: TopicPartition, offset: int) -> None:
        self.offsets.seen(tp, offset)
        if self.tracks_offsets:
            await self._commit_safe(tp)  # past it, if nothing before it is pending

    async def start(self, from_end: bool = False, topics_timeout_s: float = 5.0) -> None:
        """Join the group (or, without a group, read every partition); `from_end` skips history.
        A group-less reader gives its topics `topics_timeout_s` to be known (LookupError)."""
        await self.consumer.start()
        if self.group_id is None:
            partitions = await partitions_of(self.consumer, self.topic_names, topics_timeout_s)
            self.consumer.assign(partitions)
            if from_end:
                await self.consumer.seek_to_end(*partitions)
        else:
            self.consumer.subscribe(self.topic_names, listener=self.listener)

    async def stop(self) -> None:
        await self.consumer.stop()

    async def __aenter__(self) -> EventConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def events(self, poll_timeout_ms: int = 500) -> AsyncIterator[Received]:
        """Yield decoded events forever; the caller commits each after handling it."""
        while True:
            for received in await self.poll(poll_timeout_ms):
                yield received

    async def poll(self, timeout_ms: int = 500) -> list[Received]:
        """The next batch of decoded events (empty if none came within `timeout_ms`)."""
        out = []
        batches = await self.consumer.getmany(timeout_ms=timeout_ms)
        for records in batches.values():
            for record in records:
                received = await self._decode(record)
                if received is not None:
                    out.append(received)
        return out

    async def _decode(self, record: ConsumerRecord) -> Received | None:
        tp = TopicPartition(record.topic, record.partition)
        if self.tracks_offsets and tp not in self.offsets.committed:
            # Where this partition was read from: committing that again would say nothing.
            self.offsets.mark_committed({tp: record.offset})
        try:
            event = self.codec.decode(record.value)
            if not self.any_type and (
                    why := misplaced(record.topic, type(event).__name__)) is not None:
                raise DecodeError(why)
        except DecodeError as err:
            if await self.letters.first(record.topic, record.partition, record.offset):
                await self.producer.dead_letter(record, str(err), self.group_id)
                self.dead_lettered += 1
            await self.on_skip(tp, record.offset)
            return None
        if self.tracks_offsets and tp in self.consumer.assignment():
            self.offsets.begin(tp, record.offset)  # until the caller commits it
        key = record.key.decode(errors="replace") if record.key is not None else None
        return Received(
            record.topic, record.partition, record.offset, key, event, record.timestamp
        )

    async def refuse(self, received: Received, error: str) -> None:
        """Dead-letter an event that decoded but that no process may act on (commit it after)."""
        if await self.letters.first(received.topic, received.partition, received.offset):
            await self.producer.refuse(received, error, self.group_id)
            self.dead_lettered += 1

    async def commit(self, received: Received) -> None:
        """The event is handled: commit its partition as far as nothing before is pending."""
        if not self.tracks_offsets:
            await self.commit_offset(received.tp, received.offset)
            return
        self.offsets.finish(received.tp, received.offset)
        await self._commit_safe(received.tp)

    async def _commit_safe(self, tp: TopicPartition) -> None:
        safe = self.offsets.safe_offset(tp)
        if safe is None or safe <= self.offsets.committed.get(tp, -1):
            return  # an earlier event is still being handled, or nothing moved
        if tp not in self.consumer.assignment():
            return  # the partition moved away; its new owner re-reads from the last commit
        await self.consumer.commit({tp: OffsetAndMetadata(safe, "")})
        self.offsets.mark_committed({tp: safe})

    async def commit_offset(self, tp: TopicPartition, offset: int) -> None:
        """Mark everything up to and including `offset` on `tp` as handled (no tracking)."""
        if self.group_id is None:
            return
        if tp not in self.consumer.assignment():
            return  # the partition moved away; its new owner re-reads from the last commit
        await self.consumer.commit({tp: OffsetAndMetadata(offset + 1, "")})


async def commit_bounded(consumer: EventConsumer, received: Received, timeout_s: float) -> bool:
    """Commit, but never die or stall on it: a commit that hangs on a lost coordinator or
    fails in a rebalance is logged, and the offset goes with a later commit (or the event
    comes again; consumers are idempotent). False when it did not commit."""
    try:
        await asyncio.wait_for(consumer.commit(received), timeout_s)
    except (TimeoutError, KafkaError) as err:
        log.warning("%s: commit of %s@%d failed (%r); going on", consumer.group_id,
                    received.topic, received.offset, err)
        return False
    return True
