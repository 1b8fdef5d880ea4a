"""Reading topics without a group: the first events of a topic, a topic to its end, a
compacted topic as a table, one partition from a point in time. Nothing here commits;
every reader sees committed records only (the consumers of webgym_common.stream.bus read
`read_committed`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiokafka import AIOKafkaConsumer, TopicPartition

from webgym_common.codec import Codec, DecodeError
from webgym_common.config import Settings
from webgym_common.events import Event
from webgym_common.stream.bus import EventConsumer, EventProducer, Received
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.topics import Topic, topic_name


async def read_events(
    settings: Settings,
    topic: Topic,
    count: int,
    producer: EventProducer,
    timeout_s: float = 30.0,
) -> list[Received]:
    """Read the first `count` events of a topic from the beginning, without a group."""
    out: list[Received] = []
    async with EventConsumer(settings, [topic], None, producer, client_id="webgym-reader",
                             any_type=True) as c:
        async with asyncio.timeout(timeout_s):
            async for received in c.events():
                out.append(received)
                if len(out) >= count:
                    break
    return out


# -- reading a topic to its end (compacted topics as tables) ---------------------------


async def batches_to_end(
    consumer: EventConsumer, stall_timeout_s: float = 60.0
) -> AsyncIterator[list[Received]]:
    """Batches from the consumer's assigned partitions up to their end offsets as of now.

    The end offsets are taken once, so a busy topic cannot keep the read going
    forever; records past them that come in the same fetch are kept. Raises
    TimeoutError when no partition moves for `stall_timeout_s` (a long log is fine).
    """
    c = consumer.consumer
    parts = sorted(c.assignment())
    # end_offsets and position can block for good if a partition is gone.
    ends = await asyncio.wait_for(c.end_offsets(parts), stall_timeout_s)
    loop = asyncio.get_running_loop()
    last: dict[TopicPartition, int] = {}
    moved_at = loop.time()
    while True:
        now = {tp: await asyncio.wait_for(c.position(tp), stall_timeout_s) for tp in parts}
        if all(now[tp] >= ends[tp] for tp in parts):
            return
        if now != last:
            last, moved_at = now, loop.time()
        elif loop.time() - moved_at > stall_timeout_s:
            raise TimeoutError(f"reading {', '.join(consumer.topic_names)} to its end stalled")
        batch = await consumer.poll(timeout_ms=200)
        if batch:
            yield batch


async def read_to_end(consumer: EventConsumer, stall_timeout_s: float = 60.0) -> list[Received]:
    return [r async for batch in batches_to_end(consumer, stall_timeout_s) for r in batch]


async def any_record(consumer: AIOKafkaConsumer, part: TopicPartition, start: int,
                     end: int) -> bool:
    """Whether a committed record lies in [start, end) of `part`: a transactional topic's
    end offset counts its commit markers, which are never delivered, so "committed < end"
    alone cannot tell a reader that has read everything. Assigns `part` to `consumer` (which
    must have no group) for the check only, and pauses it after."""
    consumer.assign([part])
    try:
        consumer.seek(part, start)
        while await consumer.position(part) < end:
            batch = await consumer.getmany(part, timeout_ms=500, max_records=1)
            if any(r.offset < end for r in batch.get(part, [])):
                return True
        return False
    finally:
        # No prefetching of a partition nobody reads. Not unsubscribe(): aiokafka 0.14's
        # fetcher then fails on the missing subscription, and stop() raises or hangs.
        consumer.pause(part)


async def read_compacted(
    settings: Settings, topic: Topic, producer: EventProducer, stall_timeout_s: float = 60.0
) -> dict[str, Event]:
    """A compacted topic as a table: the latest event per key (no group, nothing committed)."""
    latest: dict[str, Event] = {}
    async with EventConsumer(settings, [topic], None, producer, client_id="table-reader") as c:
        # Within a partition the later offset is the newer value; a key lives in one partition.
        for received in await read_to_end(c, stall_timeout_s):
            if received.key is not None:
                latest[received.key] = received.event
    return latest


# -- one partition from a point in time (no group) --------------------------------------


class PartitionLog:
    """Reads one partition of a topic from a point in time to its current end, no group.

    For a process that must know what the log already holds before it acts again on a
    partition it (re)took: the completions a browser worker must not start again, the
    actions a restarted policy must not publish twice. One manual assignment at a time.
    """

    def __init__(self, settings: Settings, codec: Codec, client_id: str) -> None:
        self.settings, self.codec, self.client_id = settings, codec, client_id
        self.consumer: AIOKafkaConsumer | None = None  # made in the loop that reads
        self.lock = asyncio.Lock()
        self._stopping: set[asyncio.Future[None]] = set()  # abandoned consumers being stopped

    async def start(self) -> AIOKafkaConsumer:
        """Connect now (else the first read does)."""
        if self.consumer is None:
            consumer = make_consumer(self.settings, [], None, self.client_id)
            await consumer.start()
            self.consumer = consumer
        return self.consumer

    async def stop(self) -> None:
        if self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            await consumer.stop()

    async def events_since(self, topic: Topic, partition: int, since_ms: int,
                           timeout_s: float) -> list[Event]:
        """The events of `partition` whose record time is `since_ms` or later, up to the
        partition's end as of the call (undecodable records left out: nothing acted on
        them). Raises TimeoutError after `timeout_s`, waiting for the lock included."""
        # The read runs as its own task, watched from outside: a cancelled aiokafka call can
        # swallow its cancellation, so a timeout inside the read may never fire. On timeout
        # the task is abandoned with its consumer, and the next read connects afresh.
        read = asyncio.ensure_future(self._read(topic, partition, since_ms))
        done, _ = await asyncio.wait({read}, timeout=timeout_s)
        if read in done:
            return read.result()
        read.cancel()
        abandoned, self.consumer, self.lock = self.consumer, None, asyncio.Lock()
        if abandoned is not None:
            stopping = asyncio.ensure_future(_stop_quietly(abandoned))
            self._stopping.add(stopping)
            stopping.add_done_callback(self._stopping.discard)
        raise TimeoutError(f"reading {topic_name(self.settings.kafka, topic)}[{partition}] "
                           f"took over {timeout_s:.0f} s")

    async def _read(self, topic: Topic, partition: int, since_ms: int) -> list[Event]:
        tp = TopicPartition(topic_name(self.settings.kafka, topic), partition)
        out: list[Event] = []
        async with self.lock:
            c = await self.start()
            c.assign([tp])
            found = (await c.offsets_for_times({tp: max(0, since_ms)})).get(tp)
            end = (await c.end_offsets([tp]))[tp]
            start = found.offset if found is not None else end
            if start >= end:
                return out
            c.seek(tp, start)
            while await c.position(tp) < end:
                for record in (await c.getmany(tp, timeout_ms=500)).get(tp, []):
                    if record.offset >= end:
                        break
                    try:
                        out.append(self.codec.decode(record.value))
                    except DecodeError:
                        continue
        return out


async def _stop_quietly(consumer: AIOKafkaConsumer, timeout_s: float = 10.0) -> None:
    """Stop a consumer a timed-out read left behind; it may be wedged, so bounded."""
    try:
        async with asyncio.timeout(timeout_s):
            await consumer.stop()
    except Exception:  # noqa: BLE001 - a wedged client's last act; nothing to recover
        pass
