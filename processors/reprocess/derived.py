"""Derived topics: where `webgym reprocess` writes (a new topic, never one of the pipeline's).

Delivery: exactly once per key per run, resumable. A derived topic is created with the
configuration (partitions, cleanup, retention) of the pipeline topic it derives from, under
a name that no registry topic or faust-internal topic has. Writes go out in Kafka
transactions of a producer whose transactional id is the derived topic's name, so a run
started again fences the one that was killed (its open transaction is aborted: readers,
`read_committed`, never see it), reads the topic to its end and skips every key already
there (a topic the run itself has just created holds none: not read, `on_target`). One run
writes one topic: two runs at once on the same topic fence each other.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from aiokafka.partitioner import DefaultPartitioner

from webgym_common.config import Settings
from webgym_common.events import Event
from webgym_common.logrange.bounds import range_reader
from webgym_common.stream.admin import create_topic
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.kafka_clients import make_producer
from webgym_common.stream.readers import batches_to_end
from webgym_common.topics import Topic, all_topic_specs, topic_specs

_LEGAL = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class DerivedTopicError(ValueError):
    """A target name that must not be written (the pipeline's own topic, an illegal name)."""


def refusal(settings: Settings, name: str) -> str | None:
    """Why `name` cannot be a derived topic, or None."""
    if not _LEGAL.match(name) or name in (".", ".."):
        return f"{name!r} is not a legal Kafka topic name (letters, digits, . _ -)"
    if name in {s.name for s in all_topic_specs(settings.kafka)}:
        return f"{name} is one of the pipeline's own topics: replay writes a new topic"
    return None


def transactional_id(name: str) -> str:
    return f"webgym-replay-{name}"


async def create_derived(settings: Settings, source: Topic, name: str) -> str:
    """Create `name` like `source` ("created"), or find it made before ("exists")."""
    if (why := refusal(settings, name)) is not None:
        raise DerivedTopicError(why)
    spec = replace(topic_specs(settings.kafka)[source], name=name)
    return await create_topic(settings, spec)


async def written(settings: Settings, producer: EventProducer, name: str,
                  key_of: Callable[[Event], str | None],
                  stall_timeout_s: float = 60.0) -> dict[str, Event]:
    """The first event per key (`key_of`; None: not counted) already on the derived topic."""
    out: dict[str, Event] = {}
    async with range_reader(settings, [name], producer, "replay-resume") as reader:
        async for batch in batches_to_end(reader, stall_timeout_s):
            for received in batch:
                key = key_of(received.event)
                if key is not None:
                    out.setdefault(key, received.event)
    return out


async def on_target(settings: Settings, producer: EventProducer, source: Topic, name: str,
                    key_of: Callable[[Event], str | None]) -> dict[str, Event]:
    """Create the derived topic `name` like `source` (or find it) and return what is on it
    already (`written`). A topic this call created holds nothing: no read of it, which
    would wait for a fresh topic's metadata and offsets (a tenth of a second and more)."""
    if await create_derived(settings, source, name) == "created":
        return {}
    return await written(settings, producer, name, key_of)


class DerivedWriter:
    """Writes (key, event) batches to a derived topic, one transaction per batch."""

    def __init__(self, settings: Settings, name: str, producer: EventProducer) -> None:
        self.name, self.codec = name, producer.codec
        self.timeout_s = settings.kafka.request_timeout_ms / 1000
        # A transaction's records for a partition fit one batch: a second batch of the same
        # partition waits for the first to be sent (a round trip each).
        self.producer = make_producer(settings, "webgym-replay", transactional_id(name),
                                      max_batch_size=settings.kafka.max_request_size)
        self.partitioner = DefaultPartitioner()

    async def start(self) -> None:
        async with asyncio.timeout(self.timeout_s * 2):
            await self.producer.start()  # fences a killed run's producer, aborting its writes

    async def stop(self) -> None:
        await self.producer.stop()

    async def __aenter__(self) -> DerivedWriter:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def write(self, records: Sequence[tuple[str, Event]]) -> None:
        """The records in one transaction, each on the partition its key gives (the default
        partitioner's, as a plain send), in order. They go as a batch per partition
        (create_batch / send_batch): a send per record cost more CPU than its encoding."""
        if not records:
            return
        async with asyncio.timeout(self.timeout_s * 2):
            async with self.producer.transaction():
                partitions = sorted(await self.producer.partitions_for(self.name))
                open_: dict[int, Any] = {}
                sent = []
                for key, event in records:
                    k, value = key.encode(), self.codec.encode(event)
                    p = self.partitioner(k, partitions, partitions)
                    batch = open_.get(p)
                    if batch is None or batch.append(key=k, value=value, timestamp=None) is None:
                        if batch is not None:  # full: it goes, a new one takes the record
                            sent.append(await self.producer.send_batch(batch, self.name,
                                                                       partition=p))
                        batch = open_[p] = self.producer.create_batch()
                        if batch.append(key=k, value=value, timestamp=None) is None:
                            raise ValueError(f"{key}: {len(value)} bytes, more than a batch")
                for p, batch in open_.items():
                    sent.append(await self.producer.send_batch(batch, self.name, partition=p))
                await asyncio.gather(*sent)
