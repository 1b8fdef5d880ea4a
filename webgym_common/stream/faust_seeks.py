"""Where a faust app's partitions read from after a rebalance, and seeks on the consumer's thread.

faust 0.15.3 leaves two restart holes around its seek after recovery; both would lose
records, so both are closed here for every faust app (ReliableApp wires them).
`rewind_uncommitted` closes the first: during recovery the consumer thread can
fetch records of a stream partition that faust still holds paused, and faust drops them;
its seek to the committed offsets after resuming the partitions brings them back, but
aiokafka skips partitions whose committed offset is missing or 0, so there they would
never come back. That seek is made to read such partitions from the start too; it must
run after the resume (a seek before it leaves the window open: the restarted policy's
first observations were never read). `FirstReads` closes the other one: a batch fetched
before faust's own seek can still move its read offset past the committed one, and the
first records of the partition are then dropped as already read; it seeks such a
partition back, with faust's read offset of it pinned (`ReadOffsets`) until the re-read
arrives.

Seeks run on the consumer's own thread. faust's aiokafka driver keeps the Kafka consumer
in a thread of its own and sends it work through `call_thread` (a fetch, a commit,
faust's own seek to the committed offsets), one call at a time. `Consumer.seek` alone
calls the consumer directly from the app's thread: aiokafka's fetcher can then be changed
while that thread drains it, a KeyError in `fetched_records` that crashes the worker
(seen in the chaos suite, a restarted evaluator seeking back a stale batch).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import faust

log = logging.getLogger(__name__)


async def seek(consumer: Any, tp: Any, offset: int) -> None:
    """`consumer.seek(tp, offset)`, on the consumer's thread where it has one."""
    await seek_all(consumer, {tp: offset})


async def seek_all(consumer: Any, offsets: Mapping[Any, int]) -> None:
    """`consumer.seek(tp, offset)` for each partition, in one call on the consumer's thread."""
    if not offsets:
        return
    thread = getattr(consumer, "_thread", None)
    if thread is None or not hasattr(thread, "call_thread"):
        for tp, offset in offsets.items():
            await consumer.seek(tp, offset)  # no thread of its own (a test's fake)
        return

    def seek_each() -> None:
        for tp, offset in offsets.items():
            thread.seek(tp, offset)
    await thread.call_thread(seek_each)
    for tp, offset in offsets.items():
        consumer._read_offset[tp] = offset if offset else None  # what Consumer.seek also does


async def rewind_uncommitted(app: faust.App, topics: set[str]) -> dict[Any, int]:
    """Where each of this worker's partitions of `topics` reads from after a rebalance (its
    committed offset, or 0), once faust's seek after recovery has run.

    Called as the rebalance completes, before faust resumes the partitions; faust's seek
    that follows the resume reads the partitions of `topics` without a committed offset
    from the start (`seek_uncommitted_from_start`).
    """
    consumer: Any = app.consumer
    seek_uncommitted_from_start(consumer, topics)
    committed = await consumer.seek_to_committed()
    return {tp: offset or 0 for tp, offset in committed.items() if tp.topic in topics}


def seek_uncommitted_from_start(consumer: Any, topics: set[str]) -> None:
    """Make `consumer.perform_seek` (faust's seek to the committed offsets, run after each
    recovery resumes the partitions and whenever the flow was stopped) also seek the
    partitions of `topics` without a committed offset to 0, which aiokafka leaves alone."""
    if getattr(consumer, "_uncommitted_topics", None) is not None:
        consumer._uncommitted_topics |= topics
        return
    consumer._uncommitted_topics = set(topics)
    faust_seek = consumer.perform_seek

    async def perform_seek() -> None:
        await faust_seek()
        committed = consumer._committed_offset  # faust keeps only the non-zero ones
        uncommitted = {tp: 0 for tp in consumer.assignment()
                       if tp.topic in consumer._uncommitted_topics and not committed.get(tp)}
        await seek_all(consumer, uncommitted)
        if uncommitted:
            log.info("read %d partitions without a committed offset from the start",
                     len(uncommitted))

    consumer.perform_seek = perform_seek


def skipped_start(first_offset: int, committed: int | None) -> bool:
    """Whether a partition's first event after an assignment skipped records: it lies past
    the committed offset the reading was to start from."""
    return committed is not None and first_offset > committed


class ReadOffsets(dict[Any, int | None]):
    """faust's read offsets (per partition, the last offset its drain loop handed out: a
    record below it is dropped as already read), except for pinned partitions: there it
    reads None and ignores faust's writes, so faust drops nothing and marks no gap.

    A partition is pinned while it is read again from its start (FirstReads): the rest of
    a stale batch, handed out after the seek back, would otherwise move the read offset
    past the start again, and faust would then drop the re-read records below it. Its own
    check of the read offset cannot close that window: faust moves the read offset only
    after the agent has taken the event, so the last stale event can look harmless.
    """

    def __init__(self, offsets: Mapping[Any, int | None] | None = None) -> None:
        super().__init__(offsets or {})
        self.pinned: set[Any] = set()

    def __missing__(self, tp: Any) -> None:
        return None  # as faust's defaultdict(lambda: None), without storing it

    def __getitem__(self, tp: Any) -> int | None:
        return None if tp in self.pinned else super().__getitem__(tp)

    def get(self, tp: Any, default: Any = None) -> Any:
        return None if tp in self.pinned else super().get(tp, default)

    def __setitem__(self, tp: Any, offset: int | None) -> None:
        if tp not in self.pinned:
            super().__setitem__(tp, offset)

    def pin(self, tp: Any) -> None:
        self.pinned.add(tp)

    def unpin(self, tp: Any) -> None:
        """Back to faust's own bookkeeping, from no read offset (what faust set while the
        partition was pinned, or before, may lie past records still to come)."""
        self.pinned.discard(tp)
        super().pop(tp, None)


def use_read_offsets(app: faust.App) -> None:
    """Give the app's consumer ReadOffsets as it is made: faust's drain loop binds the read
    offsets' methods when it starts, and during a table recovery it starts before the
    rebalance is complete, where FirstReads first learns what to pin."""
    if getattr(app, "_consumer", None) is not None or not hasattr(app, "_new_consumer"):
        read_offsets(app)  # made already (or a test's fake): replaced now
        return
    new_consumer = app._new_consumer

    def with_read_offsets() -> Any:
        consumer: Any = new_consumer()
        consumer._read_offset = ReadOffsets(consumer._read_offset)
        return consumer

    app._new_consumer = with_read_offsets  # type: ignore[method-assign]


def read_offsets(app: faust.App) -> ReadOffsets:
    """The app's consumer's read offsets, as ReadOffsets."""
    consumer: Any = app.consumer
    offsets = consumer._read_offset
    if not isinstance(offsets, ReadOffsets):
        offsets = consumer._read_offset = ReadOffsets(offsets)
    return offsets


@dataclass
class _Start:
    committed: int  # where the partition's reading was to start
    dropped_up_to: int | None = None  # the highest offset dropped since the seek
    dropped: int = 0


class FirstReads:
    """Re-reads a partition whose first event after an assignment skipped its start.

    faust 0.15.3 races its own seek after recovery: a batch fetched before the seek is
    still handed out after it, which moves faust's read offset past the committed one,
    and the re-fetched records below are then dropped as already read (seen here: a
    restarted evaluator's first observation on some partitions never arrived, and its
    episode was judged without it). `starting_at` takes the committed offsets of a new
    assignment (from `rewind_uncommitted`). `check(event)` is True for an event the agent
    must drop, neither handling nor acking it: one that lies past its partition's start
    while the start has not come. The first such event pins the partition's read offset
    (ReadOffsets: faust then drops none of what it reads again) and seeks it back to the
    start, once; the rest of the stale batch is dropped. Dropping rather than handling
    matters: acked first, such an event would let faust commit past the start (it commits
    the first run of acked offsets). An event at or below the highest dropped offset means
    the partition is being read again (from its start, or from the first record after
    transaction markers): from there on, everything is handled and faust keeps the read
    offset again. After `max_dropped` events without the start the partition is read as
    it comes (logged): never stalled.
    """

    def __init__(self, app: faust.App, max_dropped: int = 100_000) -> None:
        self.app = app
        self.max_dropped = max_dropped
        self.waiting: dict[Any, _Start] = {}
        use_read_offsets(app)

    def starting_at(self, positions: dict[Any, int]) -> None:
        offsets = read_offsets(self.app)
        for tp in list(offsets.pinned):
            offsets.unpin(tp)
        self.waiting = {tp: _Start(offset) for tp, offset in positions.items()}

    async def check(self, event: faust.EventT) -> bool:
        """True when the agent must drop the event: it comes again after its partition's start."""
        msg = event.message
        start = self.waiting.get(msg.tp)
        if start is None:
            return False
        if start.dropped_up_to is None:
            if not skipped_start(msg.offset, start.committed):
                del self.waiting[msg.tp]  # the start came first: nothing to do
                return False
        elif msg.offset <= start.dropped_up_to:
            self._read_on(msg.tp)  # the partition is being read again from its start
            return False
        if start.dropped >= self.max_dropped:
            log.warning("%s: its start %d still did not come after %d events: reading on",
                        msg.tp, start.committed, start.dropped)
            self._read_on(msg.tp)
            return False
        first, start.dropped_up_to = start.dropped_up_to is None, msg.offset
        start.dropped += 1
        if first:
            log.warning("%s: the event at %d came before the one at the committed offset %d: "
                        "reading the partition again from there", msg.tp, msg.offset,
                        start.committed)
            read_offsets(self.app).pin(msg.tp)  # before the seek: see ReadOffsets
            await seek(self.app.consumer, msg.tp, start.committed)
        return True

    def _read_on(self, tp: Any) -> None:
        del self.waiting[tp]
        read_offsets(self.app).unpin(tp)
