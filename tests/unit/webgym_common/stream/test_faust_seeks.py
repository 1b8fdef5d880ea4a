"""faust_seeks.py: where partitions read from after a rebalance; seeks on the consumer's thread."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

from faust.types import TP

from tests.unit.webgym_common.stream.test_faust_app import AckedEvent, AckedMessage
from webgym_common.stream import faust_seeks
from webgym_common.stream.faust_seeks import FirstReads, rewind_uncommitted, skipped_start


class Thread:
    """Stands in for faust's consumer thread: runs what is queued, in turn, and logs it."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def call_thread(self, fun: Callable[..., Any], *args: Any) -> Any:
        self.log.append("queued")
        return fun(*args)

    def seek(self, tp: Any, offset: int) -> None:
        self.log.append(f"seek {tp} {offset}")


class Consumer:
    def __init__(self, thread: Thread | None, log: list[str]) -> None:
        if thread is not None:
            self._thread = thread
        self._read_offset: dict[Any, int | None] = {}
        self.log = log

    def seek(self, tp: Any, offset: int) -> Awaitable[None]:  # faust's own: from the app's thread
        self.log.append(f"direct seek {tp} {offset}")

        async def done() -> None:
            return None
        return done()


async def test_a_seek_is_queued_on_the_consumers_thread_and_the_read_offset_moves() -> None:
    log: list[str] = []
    consumer = Consumer(Thread(log), log)
    await faust_seeks.seek(consumer, "t.obs[1]", 59)
    await faust_seeks.seek(consumer, "t.obs[2]", 0)
    assert log == ["queued", "seek t.obs[1] 59", "queued", "seek t.obs[2] 0"]
    assert consumer._read_offset == {"t.obs[1]": 59, "t.obs[2]": None}  # as Consumer.seek


async def test_a_consumer_without_a_thread_seeks_itself() -> None:
    log: list[str] = []
    await faust_seeks.seek(Consumer(None, log), "t.obs[1]", 3)
    assert log == ["direct seek t.obs[1] 3"]


async def test_seek_all_moves_every_partition_in_one_call_on_the_thread() -> None:
    log: list[str] = []
    consumer = Consumer(Thread(log), log)
    await faust_seeks.seek_all(consumer, {"t.obs[0]": 0, "t.obs[3]": 7})
    assert log == ["queued", "seek t.obs[0] 0", "seek t.obs[3] 7"]
    assert consumer._read_offset == {"t.obs[0]": None, "t.obs[3]": 7}


async def test_seek_all_of_nothing_queues_nothing() -> None:
    log: list[str] = []
    await faust_seeks.seek_all(Consumer(Thread(log), log), {})
    assert log == []


def test_a_first_event_past_the_committed_offset_skipped_the_start() -> None:
    assert skipped_start(7, committed=6)
    assert not skipped_start(6, committed=6)
    assert not skipped_start(7, committed=None)  # nothing committed: nothing to compare


class SeekingApp:
    """A faust app whose consumer records its seeks and reads a partition's log as faust's
    drain loop does: a record below the read offset is dropped as already read, and the
    read offset moves only after the agent has taken the record."""

    def __init__(self, log: dict[Any, list[int]] | None = None) -> None:
        self.seeks: list[tuple[Any, int]] = []
        self.consumer = self
        self._read_offset: dict[Any, int | None] = {}
        self.log = log or {}
        self.position: dict[Any, int] = {}  # where the next fetch starts

    async def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))
        self.position[tp] = offset
        self._read_offset[tp] = offset  # as faust's Consumer.seek

    async def drain(self, tp: Any, batch: list[int], agent: Callable[[Any], Awaitable[bool]],
                    ) -> list[int]:
        """Hand `batch` (offsets fetched before any seek), then what the partition's log
        holds from its fetch position, to `agent`; the offsets it handled, in order."""
        handled: list[int] = []
        fetched, seeks = list(batch), len(self.seeks)
        while fetched:
            offset = fetched.pop(0)
            read = self._read_offset.get(tp)
            if read is None or offset >= read:
                if not await agent(obs_event(tp[1], offset)):
                    handled.append(offset)
                self._read_offset[tp] = offset  # after the agent took it, as faust does
            if not fetched or len(self.seeks) > seeks:  # the next fetch
                seeks = len(self.seeks)
                start = self.position.pop(tp, None)
                if start is not None:
                    fetched = [o for o in self.log[tp] if o >= start]
        return handled


def obs_event(partition: int, offset: int) -> Any:
    return AckedEvent(AckedMessage("t.obs", partition, offset, []))


async def test_a_stale_batch_is_dropped_and_the_partition_read_again_from_its_start() -> None:
    p0 = ("t.obs", 0)
    app = SeekingApp({p0: list(range(6, 13))})
    reads = FirstReads(app)  # type: ignore[arg-type]
    reads.starting_at({p0: 6})
    # 8-10 were fetched before faust's seek to 6. Each stale record moves faust's read
    # offset after the agent saw it: without the pin, 10 would leave it past 6-9, and the
    # re-read of 6-9 would be dropped as already read.
    handled = await app.drain(p0, [8, 9, 10], reads.check)
    assert handled == list(range(6, 13))  # every record from the start, once, in order
    assert app.seeks == [(p0, 6)]
    assert app._read_offset.get(p0) == 12  # faust keeps the read offset again


async def test_a_partition_that_starts_at_its_committed_offset_is_left_alone() -> None:
    p1 = ("t.obs", 1)
    app = SeekingApp({p1: [3, 4, 5]})
    reads = FirstReads(app)  # type: ignore[arg-type]
    reads.starting_at({p1: 3})
    assert await app.drain(p1, [3, 4, 5], reads.check) == [3, 4, 5]
    assert app.seeks == []


async def test_a_start_behind_transaction_markers_is_the_first_record_read_again() -> None:
    p2 = ("t.obs", 2)
    app = SeekingApp({p2: [7, 8, 9]})  # 6 is a commit marker: 7 is the first record
    reads = FirstReads(app)  # type: ignore[arg-type]
    reads.starting_at({p2: 6})
    assert await app.drain(p2, [8], reads.check) == [7, 8, 9]
    assert app.seeks == [(p2, 6)]


async def test_first_reads_never_stall_a_partition() -> None:
    p0 = ("t.obs", 0)
    app = SeekingApp()
    reads = FirstReads(app, max_dropped=2)  # type: ignore[arg-type]
    reads.starting_at({p0: 6})
    for offset in (7, 8):
        assert await reads.check(obs_event(0, offset))
    assert not await reads.check(obs_event(0, 9))  # 2 dropped and still no start: read on
    assert len(app.seeks) == 1
    app._read_offset[p0] = 9
    assert app._read_offset.get(p0) == 9  # unpinned: faust's bookkeeping again


def test_read_offsets_of_a_pinned_partition_read_none_and_ignore_writes() -> None:
    offsets = faust_seeks.ReadOffsets({"a": 5, "b": 7})
    offsets.pin("a")
    offsets["a"] = 9
    assert offsets["a"] is None and offsets.get("a") is None and offsets["b"] == 7
    assert offsets["c"] is None and "c" not in offsets  # faust's defaultdict, unstored
    offsets.unpin("a")
    assert offsets["a"] is None  # neither the write while pinned nor the old offset
    offsets["a"] = 10
    assert offsets["a"] == 10


def test_the_consumer_gets_read_offsets_as_faust_makes_it() -> None:
    made = SimpleNamespace(_read_offset=defaultdict(lambda: None, {"t.obs[0]": 4}))
    app = SimpleNamespace(_consumer=None, _new_consumer=lambda: made)
    faust_seeks.use_read_offsets(app)  # type: ignore[arg-type]
    consumer = app._new_consumer()
    assert isinstance(consumer._read_offset, faust_seeks.ReadOffsets)
    assert consumer._read_offset["t.obs[0]"] == 4


class SeekingConsumer:
    """faust's consumer as `rewind_uncommitted` sees it: its seek to the committed offsets
    (which skips partitions committed at 0 or not at all, as aiokafka does) and a seek."""

    def __init__(self, committed: dict[TP, int | None], log: list[str]) -> None:
        self.committed, self.log = committed, log
        self._committed_offset: dict[TP, int | None] = {}
        self._read_offset: dict[TP, int | None] = {}

    def assignment(self) -> set[TP]:
        return set(self.committed)

    async def seek_to_committed(self) -> dict[TP, int | None]:
        return dict(self.committed)

    async def perform_seek(self) -> None:
        self.log.append("faust's seek")
        self._committed_offset.update({tp: o for tp, o in self.committed.items() if o})

    async def seek(self, tp: TP, offset: int) -> None:
        self.log.append(f"seek {tp.topic}[{tp.partition}] {offset}")


async def test_faust_seek_after_the_resume_reads_uncommitted_partitions_from_the_start() -> None:
    obs, eps, other = (TP("t.obs", 0), TP("t.obs", 1)), TP("t.eps", 0), TP("t.changelog", 0)
    log: list[str] = []
    consumer = SeekingConsumer({obs[0]: None, obs[1]: 5, eps: 0, other: None}, log)
    app: Any = SimpleNamespace(consumer=consumer)
    starts = await rewind_uncommitted(app, {"t.obs", "t.eps"})
    assert starts == {obs[0]: 0, obs[1]: 5, eps: 0}
    assert log == []  # nothing moves before faust resumes the partitions
    await consumer.perform_seek()  # what faust's recovery calls after the resume
    assert log[0] == "faust's seek"
    assert sorted(log[1:]) == ["seek t.eps[0] 0", "seek t.obs[0] 0"]
    await rewind_uncommitted(app, {"t.obs", "t.eps"})  # the next rebalance: still one seek
    log.clear()
    await consumer.perform_seek()
    assert log.count("faust's seek") == 1 and len(log) == 3
