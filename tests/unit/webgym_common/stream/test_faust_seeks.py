"""faust_seeks.py: where partitions read from after a rebalance; seeks on the consumer's thread."""

from __future__ import annotations

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
    """A faust app whose consumer records its seeks and has faust's read offsets."""

    def __init__(self) -> None:
        self.seeks: list[tuple[Any, int]] = []
        self.consumer = self
        self._read_offset: dict[Any, int] = {}

    async def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))
        self._read_offset[tp] = offset  # as faust's Consumer.seek


def obs_event(partition: int, offset: int) -> Any:
    return AckedEvent(AckedMessage("t.obs", partition, offset, []))


async def test_first_reads_drop_a_stale_batch_until_the_partition_is_read_again() -> None:
    app = SeekingApp()
    reads = FirstReads(app)  # type: ignore[arg-type]
    p0, p1 = ("t.obs", 0), ("t.obs", 1)
    reads.starting_at({p0: 6, p1: 3})
    assert await reads.check(obs_event(0, 7))  # 6 never came: dropped, read again from 6
    assert app.seeks == [(p0, 6)]
    assert not await reads.check(obs_event(1, 3))  # the start itself: nothing to do
    assert not await reads.check(obs_event(1, 9)) and app.seeks == [(p0, 6)]
    # The rest of the stale batch: dropped; no new seek while faust would read 6 again...
    assert await reads.check(obs_event(0, 8))
    assert app.seeks == [(p0, 6)]
    # ... one when a stale delivery moved faust's read offset past the start again.
    app._read_offset[p0] = 9
    assert await reads.check(obs_event(0, 9))
    assert app.seeks == [(p0, 6), (p0, 6)]
    # The partition read again: from here on everything is handled, once.
    for offset in (6, 7, 8, 9, 10):
        assert not await reads.check(obs_event(0, offset))
    assert app.seeks == [(p0, 6), (p0, 6)]


async def test_a_start_behind_transaction_markers_is_the_first_record_read_again() -> None:
    app = SeekingApp()
    reads = FirstReads(app)  # type: ignore[arg-type]
    reads.starting_at({("t.obs", 2): 6})  # 6 is a commit marker: 7 is the first record
    assert await reads.check(obs_event(2, 7))
    assert not await reads.check(obs_event(2, 7))  # read again: 7 is where it starts
    assert not await reads.check(obs_event(2, 8))


async def test_first_reads_never_stall_a_partition() -> None:
    app = SeekingApp()
    reads = FirstReads(app, max_seeks=2)  # type: ignore[arg-type]
    reads.starting_at({("t.obs", 0): 6})
    for offset in (7, 8):
        app._read_offset[("t.obs", 0)] = offset  # each delivery moves faust past the start
        assert await reads.check(obs_event(0, offset))
    assert not await reads.check(obs_event(0, 9))  # 2 seeks and still no start: read on
    assert len(app.seeks) == 2


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
