"""When an episode's trajectory is complete enough to judge: its state agents have caught up.

Delivery: this decides only *when* a completion is scored; nothing here commits.

An episode's parts travel on other topics than its EpisodeCompleted (its request on
webgym.episodes, its steps on webgym.observations and webgym.actions), all
co-partitioned by episode id, and each is folded into a table by its own agent. The
parts are appended before the completion is: the controller requests the episode, the
browser publishes each observation and executes each action it has read, and only
then completes. So the end offsets of the completion's partition of those topics,
measured after the completion arrived, bound where its parts can be. A completion
waits until its parts are all in the tables, or until every agent has handled its
partition up to that end (`lagging`): a part still missing then never arrives, and
the episode is scored with what is there, saying so. No fixed wall-clock wait: after
a restart with a backlog the agents may need minutes to catch up, and they are
waited for as long as they move.

Two corner cases: a partition whose tail is only transaction markers cannot be
handled up to its end (markers are never delivered), so an agent that sits idle
below the end for `trajectory_wait_s` has the rest of its partition read: no record
there means it has caught up. And agents that handle nothing at all for
`trajectory_stall_s` while behind are given up on (a wedged consumer must not wedge
the scores); the evaluation says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from faust.types import TP

from processors.evaluator.decisions import lagging
from webgym_common.config import Settings
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.stream.readers import any_record

log = logging.getLogger(__name__)
TICK_S = 1.0


class EndOffsets:
    """The broker's view of the state partitions: end offsets, and what lies before them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.timeout_s = settings.kafka.request_timeout_ms / 1000
        self.consumer: AIOKafkaConsumer | None = None
        self.lock = asyncio.Lock()  # one manual assignment at a time

    async def _started(self) -> AIOKafkaConsumer:
        if self.consumer is None:
            # No group, read_committed: end offsets are the last stable offsets, as the
            # agents (read_committed in exactly-once mode) see them.
            consumer = make_consumer(self.settings, [], None, client_id="evaluator-catchup")
            try:
                await asyncio.wait_for(consumer.start(), self.timeout_s)
            except BaseException:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(consumer.stop(), self.timeout_s)
                raise
            self.consumer = consumer
        return self.consumer

    async def ends(self, tps: Iterable[TP]) -> dict[TP, int]:
        async with self.lock:
            consumer = await self._started()
            got = await asyncio.wait_for(
                consumer.end_offsets([TopicPartition(tp.topic, tp.partition) for tp in tps]),
                self.timeout_s)
        return {TP(tp.topic, tp.partition): offset for tp, offset in got.items()}

    async def any_record(self, tp: TP, start: int, end: int) -> bool:
        """Whether a committed record lies in [start, end) (markers and aborted ones don't)."""
        async with self.lock, asyncio.timeout(self.timeout_s):
            consumer = await self._started()
            return await any_record(consumer, TopicPartition(tp.topic, tp.partition), start, end)

    async def stop(self) -> None:
        if self.consumer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.consumer.stop(), self.timeout_s)
            self.consumer = None


class Moved(Exception):
    """The completion's partition was revoked while it waited: nothing to publish here."""


class CatchUp:
    """How far each state agent has got, and the wait of a completion for its parts."""

    def __init__(self, app: faust.App, settings: Settings, state_topics: list[str]) -> None:
        self.app = app
        self.topics = state_topics
        self.idle_s = settings.evaluator.trajectory_wait_s
        self.stall_s = settings.evaluator.trajectory_stall_s
        self.offsets = EndOffsets(settings)
        self.handled_to: dict[TP, int] = {}  # the offset after the last record handled
        self.changed = asyncio.Condition()  # notified whenever an agent handles a record

    async def handled(self, event: faust.EventT) -> None:
        """An agent is done with this record: its table change is applied (and acked)."""
        tp, offset = event.message.tp, event.message.offset
        if event.message.acked:  # not acked: its partition moved away, nothing was applied
            self.handled_to[tp] = max(self.handled_to.get(tp, 0), offset + 1)
        async with self.changed:
            self.changed.notify_all()

    def forget(self) -> None:
        """After a rebalance: what was handled but not committed may have been undone."""
        self.handled_to.clear()

    def position(self, tp: TP) -> int:
        """Every record below this offset of `tp` is in its table (handled, or committed
        before this worker got the partition and recovered from the changelog)."""
        consumer: Any = self.app.consumer
        committed = consumer._committed_offset.get(tp)  # faust's record: the next offset
        return max(self.handled_to.get(tp, 0), committed or 0)

    async def wait(self, completion: TP, missing: Callable[[], list[str]]) -> str | None:
        """Until nothing is `missing` (None), or why the missing parts will never come.

        Raises Moved when the completion's partition has been away for `trajectory_wait_s`
        (a rebalance that gives it back within that keeps the wait going: the outbox then
        commits this event in line, ahead of its re-delivery)."""
        if not missing():
            return None
        tps = [TP(topic, completion.partition) for topic in self.topics]
        clock = asyncio.get_running_loop().time
        targets = await self._ends(tps)
        caught: set[TP] = set()  # idle below its end with only markers left
        last, moved_at, gap_read_at = {tp: -1 for tp in tps}, clock(), clock()
        here_at = clock()  # when the completion's partition was last seen assigned here
        while missing():
            if completion in self.app.consumer.assignment():
                here_at = clock()
            elif clock() - here_at >= self.idle_s:
                raise Moved(f"{completion} moved to another worker; it scores this episode")
            now_at = {tp: targets[tp] if tp in caught else self.position(tp) for tp in tps}
            behind = lagging(targets, now_at)
            if not behind:
                return "the state topics were read past the completion"
            if now_at != last:
                last, moved_at = now_at, clock()
            idle = clock() - moved_at
            if idle >= self.stall_s:
                return (f"the agents of {', '.join(str(tp) for tp in behind)} handled nothing "
                        f"for {self.stall_s:.0f}s while behind the completion")
            if idle >= self.idle_s and clock() - gap_read_at >= self.idle_s:
                gap_read_at = clock()
                for tp in behind:
                    try:
                        if not await self.offsets.any_record(tp, now_at[tp], targets[tp]):
                            caught.add(tp)
                    except (KafkaError, TimeoutError, OSError) as err:  # next idle round
                        log.warning("cannot read %s to its end: %r", tp, err)
                continue
            with contextlib.suppress(TimeoutError):
                async with self.changed:
                    await asyncio.wait_for(self.changed.wait(), min(TICK_S, self.idle_s / 2))
        return None

    async def _ends(self, tps: list[TP]) -> dict[TP, int]:
        """The end offsets, asked again while the broker cannot say (never a dead letter for
        a good completion because Kafka was briefly away); the error once stall_s is over."""
        clock = asyncio.get_running_loop().time
        started = clock()
        while True:
            try:
                return await self.offsets.ends(tps)
            except (KafkaError, TimeoutError, OSError) as err:
                if clock() - started >= self.stall_s:
                    raise
                log.warning("cannot read the end offsets of %s: %r; asking again", tps, err)
                await asyncio.sleep(2.0)
