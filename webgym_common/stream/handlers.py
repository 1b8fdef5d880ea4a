"""One way to write a handler, on either runtime: per key, the event and its state in,
`Effects` out.

Delivery: at least once. A handler decides; it may read (a model, the object store, a
topic) but writes nothing itself. The runtime beneath it applies what it returns, then
acks the event, so a kill at any moment leaves the event to be read again, and handlers
make the re-read harmless by the state they keep (an episode counted already, an action
written down). How each runtime applies the effects:

- the bus runtime (`handle_each` below, an aiokafka consumer group): the records are
  published and the input refused (dead-lettered), each tried again while Kafka is down,
  then the state is remembered in this process's memory (`Memory`), then the offset is
  committed in order. A fold whose state is its own output topic (history) rebuilds the
  memory from that topic whenever its partitions change.
- the faust runtime (webgym_common.stream.reliable.ReliableApp.each): the state is written
  durably to a changelog-backed table first, then the records are published on the input's
  partition (the topics are co-partitioned), each tried again while `retry_while` allows;
  the event is acked in arrival order per partition.

    async def on_scored(scored: EpisodeScored, history: TaskHistory | None,
                        origin: Origin) -> Effects[TaskHistory]:
        updated = fold(history, scored)
        if updated is None:
            return NOTHING
        return Effects([Publish(Topic.TASK_HISTORY, scored.task_id, updated)], updated)
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

from aiokafka.errors import KafkaError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential

from webgym_common.events import Event
from webgym_common.stream.bus import (
    EventConsumer,
    EventProducer,
    Ownership,
    Received,
    commit_bounded,
    too_large,
)
from webgym_common.topics import Topic

log = logging.getLogger(__name__)
E = TypeVar("E", bound=Event)
E_contra = TypeVar("E_contra", bound=Event, contravariant=True)
S = TypeVar("S")
T = TypeVar("T")
RETRY_MAX_S = 10.0


class Keep(Enum):
    STATE = "keep"


KEEP = Keep.STATE  # Effects.state: the key's state stays as it is


@dataclass(frozen=True)
class Publish:
    """A record to publish: an event under its key."""

    topic: Topic
    key: str
    event: Event


@dataclass(frozen=True)
class Origin:
    """Where the event being handled was read."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


@dataclass(frozen=True)
class Effects(Generic[S]):
    """What handling one event changes: records to publish, the key's state from now on
    (None: forget the key; KEEP: unchanged), and why the input is refused (dead-lettered)."""

    publish: Sequence[Publish] = ()
    state: S | None | Keep = KEEP
    refuse: str | None = None


NOTHING: Effects[Any] = Effects()


class Handler(Protocol[E_contra, S]):
    def __call__(self, event: E_contra, state: S | None, origin: Origin, /
                 ) -> Awaitable[Effects[S]]:
        ...


def kafka_transient(err: BaseException) -> bool:
    """Kafka down or slow (try again), not a record it will never take."""
    return isinstance(err, (KafkaError, TimeoutError, OSError)) and not too_large(err)


async def persistently(what: str, call: Callable[[], Awaitable[T]],
                       transient: Callable[[BaseException], bool] = kafka_transient) -> T:
    """`call` until it stops failing for a passing reason; other failures are raised."""
    def warn(state: RetryCallState) -> None:
        err = state.outcome.exception() if state.outcome else None
        log.warning("%s failed (%r); trying again in %.1f s", what, err, state.upcoming_sleep)

    async for attempt in AsyncRetrying(wait=wait_exponential(multiplier=0.2, max=RETRY_MAX_S),
                                       retry=retry_if_exception(transient), before_sleep=warn,
                                       reraise=True):
        with attempt:
            return await call()
    raise AssertionError("unreachable: tenacity reraises")


async def retried_while(call: Callable[[], Awaitable[T]], what: str,
                        useful: Callable[[float], bool], max_backoff_s: float,
                        transient: Callable[[BaseException], bool] = kafka_transient
                        ) -> T | None:
    """`call()`, tried again with exponential backoff while its failure is `transient` (by
    default: Kafka refusing it for a passing reason) and `useful(next_try_in_s)`; None once
    no longer useful. Other failures are raised."""
    backoff = 0.5
    while True:
        try:
            return await call()
        except Exception as err:
            if not transient(err):
                raise
            if not useful(backoff):
                log.warning("%s: giving up (%r): no longer useful", what, err)
                return None
            log.warning("%s: %r; trying again in %.1f s", what, err, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)


class Memory(Generic[S]):
    """The bus runtime's state: a dict in this process's memory.

    `rebuild()`: the state as published, read again whenever `ownership` says the
    partitions changed (a fold whose state is its own compacted output topic); without it
    the memory is what this run did, at most `bound` keys (the oldest forgotten first).
    """

    def __init__(self, rebuild: Callable[[], Awaitable[dict[str, S]]] | None = None,
                 ownership: Ownership | None = None, bound: int | None = None) -> None:
        self.rebuild, self.ownership, self.bound = rebuild, ownership, bound
        self.data: OrderedDict[str, S] = OrderedDict()

    async def refresh(self) -> None:
        if self.rebuild is not None and self.ownership is not None and self.ownership.stale:
            self.ownership.stale = False  # before the read: a rebalance during it marks again
            self.data = OrderedDict(await self.rebuild())

    def get(self, key: str) -> S | None:
        return self.data.get(key)

    def put(self, key: str, state: S | None) -> None:
        self.data.pop(key, None)
        if state is not None:
            self.data[key] = state
        while self.bound is not None and len(self.data) > self.bound:
            self.data.popitem(last=False)


async def handle_each(consumer: EventConsumer, producer: EventProducer, of: type[E],
                      key: Callable[[E], str], handle: Handler[E, S], memory: Memory[S],
                      commit_timeout_s: float) -> None:
    """The bus runtime: `handle(event, state, origin)` for each `of` read, its effects
    applied (see the module doc), then its offset committed; other events are committed
    untouched (bytes that do not decode were dead-lettered by the consumer)."""
    async for received in consumer.events():
        # consume: a record of a partition that moved away mid-batch is its new owner's
        if received.tp not in consumer.consumer.assignment():
            continue
        await memory.refresh()
        if isinstance(event := received.event, of):
            k = key(event)
            effects = await handle(event, memory.get(k), origin_of(received))  # decide
            await apply(consumer, producer, received, effects)  # publish
            if effects.state is not KEEP:  # remember; a crash before is undone by the rebuild
                memory.put(k, effects.state)
        await commit_bounded(consumer, received, commit_timeout_s)


async def apply(consumer: EventConsumer, producer: EventProducer, received: Received,
                effects: Effects[Any]) -> None:
    """Publish the effects' records (at once), then refuse the input if they say so."""
    def publishing(p: Publish) -> Awaitable[None]:
        return persistently(f"publishing {p.key} to {p.topic.value}",
                            lambda: producer.publish(p.topic, p.key, p.event))

    await asyncio.gather(*(publishing(p) for p in effects.publish))
    if (why := effects.refuse) is not None:
        await persistently(f"dead-lettering {received.topic}@{received.offset}",
                           lambda: consumer.refuse(received, why))


def origin_of(received: Received) -> Origin:
    return Origin(received.topic, received.partition, received.offset, received.timestamp_ms)
