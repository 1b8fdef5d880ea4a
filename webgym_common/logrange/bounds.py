"""A range of the log: by offset or by time (`--from/--to`), and by iteration.

Used by `webgym reprocess` to re-read part of a topic. A bound is an integer (an offset, the
same in every partition) or an ISO timestamp (the records' broker timestamps; no zone
means UTC). `--from` is inclusive, `--to` exclusive; no bound means the log's beginning
or its end as of the start of the read (a busy topic cannot keep a replay going). An
iteration set ("0,2-4") filters events by their `iteration` field after reading.

Reading is group-less and commits nothing; it sees committed records only (the project's
consumers read `read_committed`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, TopicPartition

from webgym_common.codec import Codec
from webgym_common.config import Settings
from webgym_common.stream.bus import EventConsumer, EventProducer, Received
from webgym_common.topics import Topic

Spans = dict[TopicPartition, tuple[int, int]]  # each partition's [from, to) offsets


class RangeError(ValueError):
    """A bound or an iteration list that does not parse."""


@dataclass(frozen=True)
class Bound:
    """One end of a range: an offset in every partition, or a time (ms since the epoch)."""

    offset: int | None = None
    time_ms: int | None = None


@dataclass(frozen=True)
class LogRange:
    start: Bound | None = None  # inclusive
    end: Bound | None = None  # exclusive
    iterations: frozenset[int] | None = None  # None: every iteration

    def wants(self, iteration: int) -> bool:
        return self.iterations is None or iteration in self.iterations


def parse_bound(text: str | None) -> Bound | None:
    """"1200" is an offset, "2026-11-24T02:00" (or with seconds, a zone) a time."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    if text.isdigit():
        return Bound(offset=int(text))
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise RangeError(f"{text!r} is neither an offset nor an ISO timestamp") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return Bound(time_ms=int(when.timestamp() * 1000))


def parse_iterations(text: str | None) -> frozenset[int] | None:
    """"3", "0,2", "1-4" or a mix: the iterations named; None (every one) for no text."""
    if text is None or not text.strip():
        return None
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise RangeError(f"{part!r} is not an iteration or a range like 2-4") from None
        if last < first:
            raise RangeError(f"{part!r}: the range ends before it starts")
        out.update(range(first, last + 1))
    return frozenset(out)


def span(start: Bound | None, end: Bound | None, first: int, log_end: int,
         start_at_time: int | None = None, end_at_time: int | None = None) -> tuple[int, int]:
    """One partition's [from, to) offsets within [first, log_end).

    `start_at_time` / `end_at_time` are the broker's answer for a time bound (the first
    offset at or after the time; None when every record is older: the log's end)."""
    lo, hi = first, log_end
    if start is not None:
        lo = start.offset if start.offset is not None else (
            log_end if start_at_time is None else start_at_time)
    if end is not None:
        hi = end.offset if end.offset is not None else (
            log_end if end_at_time is None else end_at_time)
    lo = max(first, min(lo, log_end))
    hi = max(lo, min(hi, log_end))
    return lo, hi


@asynccontextmanager
async def range_reader(settings: Settings, topics: Sequence[Topic | str],
                       producer: EventProducer, client_id: str, codec: Codec | None = None,
                       timeout_s: float = 30.0) -> AsyncIterator[EventConsumer]:
    """A group-less EventConsumer (any event type) started on every partition of `topics`,
    within `timeout_s`. `codec`: the producer's, or one that decodes only what the job reads
    (Codec.projected)."""
    reader = EventConsumer(settings, topics, None, producer, codec=codec, client_id=client_id,
                           any_type=True)
    try:
        async with asyncio.timeout(timeout_s):
            await reader.start(topics_timeout_s=timeout_s)
        yield reader
    finally:
        await reader.stop()


async def spans(consumer: AIOKafkaConsumer, parts: list[TopicPartition], rng: LogRange,
                timeout_s: float = 30.0) -> Spans:
    """Each partition's [from, to) for the range, asked of the broker once."""
    async with asyncio.timeout(timeout_s):
        firsts = await consumer.beginning_offsets(parts)
        ends = await consumer.end_offsets(parts)
        at: dict[str, dict[TopicPartition, int | None]] = {}
        for name, bound in (("start", rng.start), ("end", rng.end)):
            if bound is not None and bound.time_ms is not None:
                found = await consumer.offsets_for_times({tp: bound.time_ms for tp in parts})
                at[name] = {tp: (o.offset if o is not None else None) for tp, o in found.items()}
    return {tp: span(rng.start, rng.end, firsts[tp], ends[tp], at.get("start", {}).get(tp),
                     at.get("end", {}).get(tp)) for tp in parts}


def records_in(ranges: Spans) -> int:
    """Offsets in the ranges: an upper bound on the records (transaction markers count too)."""
    return sum(hi - lo for lo, hi in ranges.values())


async def read_range(consumer: EventConsumer, rng: LogRange, stall_timeout_s: float = 60.0,
                     on_spans: Callable[[Spans], None] | None = None
                     ) -> AsyncIterator[list[Received]]:
    """Batches of the range's records (a started, group-less consumer), in offset order per
    partition. Raises TimeoutError when no partition moves for `stall_timeout_s`."""
    c = consumer.consumer
    parts = sorted(c.assignment())
    ranges = await spans(c, parts, rng, stall_timeout_s)
    if on_spans is not None:
        on_spans(ranges)
    async for batch in read_spans(consumer, ranges, stall_timeout_s):
        yield batch


async def read_spans(consumer: EventConsumer, ranges: Spans,
                     stall_timeout_s: float = 60.0) -> AsyncIterator[list[Received]]:
    c = consumer.consumer
    active = [tp for tp, (lo, hi) in ranges.items() if lo < hi]
    idle = [tp for tp in c.assignment() if tp not in active]
    if idle:
        c.pause(*idle)  # nothing to read there: no fetching either
    for tp in active:
        # Not where it stands already: a seek drops the records prefetched since the
        # assignment, and the next poll can wait its whole timeout for them again.
        if await asyncio.wait_for(c.position(tp), stall_timeout_s) != ranges[tp][0]:
            c.seek(tp, ranges[tp][0])
    loop = asyncio.get_running_loop()
    last: dict[TopicPartition, int] = {}
    moved_at = loop.time()
    while True:
        now = {tp: await asyncio.wait_for(c.position(tp), stall_timeout_s) for tp in active}
        unfinished = [tp for tp in active if now[tp] < ranges[tp][1]]
        if not unfinished:
            return
        paused = c.paused()
        finished = [tp for tp in active if tp not in unfinished and tp not in paused]
        if finished:  # records past a partition's end are not wanted: stop fetching them
            c.pause(*finished)
        if now != last:
            last, moved_at = now, loop.time()
        elif loop.time() - moved_at > stall_timeout_s:
            raise TimeoutError(f"reading {', '.join(consumer.topic_names)} stalled")
        batch = [r for r in await consumer.poll(timeout_ms=200)
                 if r.tp in ranges and r.offset < ranges[r.tp][1]]
        if batch:
            yield batch
