"""Reading what a run left in its topics, with a plain consumer (no group, so nothing is
committed and nothing dead-lettered) that reads committed records only, as every consumer
of the pipeline does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from webgym_common.codec import Codec, DecodeError
from webgym_common.config import Settings
from webgym_common.events import Event
from webgym_common.stream.bus import EventConsumer, EventProducer
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


@contextlib.asynccontextmanager
async def collected(settings: Settings, producer: EventProducer, topics: Sequence[Topic],
                    client_id: str) -> AsyncIterator[list[Event]]:
    """Every event of `topics`, read from the beginning into the list in the background
    while the block runs (the pipeline's own consumer, no group)."""
    out: list[Event] = []
    reader = EventConsumer(settings, list(topics), None, producer, client_id=client_id)

    async def read() -> None:
        async for received in reader.events(poll_timeout_ms=100):
            out.append(received.event)

    async with reader:
        task = asyncio.create_task(read())
        try:
            yield out
        finally:
            task.cancel()
