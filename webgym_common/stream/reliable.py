"""A faust app's restart safety in one place: the rewind, first reads, in-order acks,
dead letters, the handlers' effects applied, one handler per key, the worker's start-up.

Delivery: at least once. A record is acked only once its handler's effects are applied
(webgym_common.stream.handlers: the key's state written durably to its table, then the
records published on the input's partition) and every record that arrived before it on
its partition is done (InOrderAcks), so a SIGKILL at any moment leaves every unfinished
record to be read again, by this process restarted or by the partition's next owner;
handlers make the re-read harmless (the policy finds its written-down action, the
evaluator its `scored` entry). A record that is not one of our events, or whose handler
raises, is dead-lettered with the reason (once per record and group) and acked: one
poison record never stops the agent.

    reliable = ReliableApp(app, settings, [Topic.EPISODES, Topic.OBSERVATIONS])

    @app.agent(observations, concurrency=8)
    async def decide(stream):
        await reliable.each(stream, StepObserved, on_observation, key=lambda o: o.episode_id,
                            state=contexts, turn=lambda o: o.episode_id)

What it wires for every agent of the app (webgym_common.stream.faust_app explains each hole):
after each rebalance, partitions without a committed offset are read from the start
(`rewind_uncommitted`) and a stale batch handed out before faust's own seek is dropped
and read again (`FirstReads`); revoked partitions' unacked records are left to their
next owner. Apps that ack through their own transactions (the evaluator's outbox) use
`fresh(stream)` for the first-reads filter alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable
from functools import partial
from typing import Any, Protocol, TypeVar, cast

import faust

from webgym_common.config import Settings
from webgym_common.events import Event
from webgym_common.stream.faust_app import (
    InOrderAcks,
    decode_error,
    dlq_sender,
    faust_topic,
)
from webgym_common.stream.faust_seeks import FirstReads, rewind_uncommitted
from webgym_common.stream.handlers import (
    KEEP,
    RETRY_MAX_S,
    Effects,
    Handler,
    Origin,
    Publish,
    retried_while,
)
from webgym_common.topics import Topic, topic_name

log = logging.getLogger(__name__)
E = TypeVar("E", bound=Event)
S = TypeVar("S")
Positions = dict[Any, int]
Rewind = Callable[[faust.App, set[str]], Awaitable[Positions]]
Usefulness = Callable[[float], bool]  # whether a failed write is worth a try in s seconds


class TableState(Protocol[S]):
    """Where a faust app keeps its handlers' state: a changelog-backed table."""

    def get(self, key: str) -> S | None: ...

    async def put(self, key: str, state: S | None, partition: int) -> bool:
        """Write the key's state down durably (True once the broker has it)."""
        ...


def always(event: Any) -> Usefulness:
    return lambda next_try_in_s: True


class OneAtATime:
    """Handlers of the same key run one after another in this process (other keys alike).

    faust 0.15.3 can hand out the record at a partition's committed offset twice after a
    (re)assignment (a batch fetched before its own seek, then the seek: its read-offset
    check lets an offset equal to the read offset through), and a rebalance re-reads what
    is in flight. Two actors deciding one episode at once would both act; taken in turn,
    the second sees what the first wrote down. Unused keys hold no lock.
    """

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def of(self, key: Hashable | None) -> AsyncIterator[None]:
        """Hold `key`'s turn (None: no turn is taken)."""
        if key is None:
            yield
            return
        lock, users = self._locks.get(key, (None, 0))
        if users:  # rare (a record handed out twice): said, so that a long wait is not silent
            log.info("%s: waits for the handler of the same key before it", key)
        lock = lock or asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            _, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def busy(self) -> int:
        """Keys with a handler running or waiting."""
        return len(self._locks)


class ReliableApp:
    """The restart-safety wiring of one faust app whose agents read `sources`."""

    def __init__(self, app: faust.App, settings: Settings, sources: Iterable[Topic],
                 rewind: Rewind = rewind_uncommitted, max_backoff_s: float = RETRY_MAX_S
                 ) -> None:
        self.app, self.settings, self.max_backoff_s = app, settings, max_backoff_s
        self.outputs: dict[Topic, faust.TopicT] = {}
        self.topics = {topic_name(settings.kafka, t) for t in sources}
        self.first_reads = FirstReads(app)
        self.acks = InOrderAcks()
        self.in_turn = OneAtATime()
        self.dead_letters = dlq_sender(app, settings)
        self._rebalanced: list[Callable[[], None]] = []
        self._started: list[Callable[[Positions], None]] = []
        self._revoked: list[Callable[[set[Any]], None]] = []

        @app.on_rebalance_complete.connect
        async def started(*args: Any, **kwargs: Any) -> None:
            for forget in self._rebalanced:
                forget()
            starts = await rewind(app, self.topics)
            self.first_reads.starting_at(starts)
            for hook in self._started:
                hook(starts)

        @app.on_partitions_revoked.connect
        async def revoked(*args: Any, **kwargs: Any) -> None:
            gone = set(args[1]) if len(args) > 1 else set()  # (app, revoked partitions)
            self.acks.forget(gone)  # their next owner reads what was not acked
            for hook in self._revoked:
                hook(gone)

    def on_rebalance(self, hook: Callable[[], None]) -> None:
        """`hook()` as soon as a rebalance completes, before the partitions are rewound."""
        self._rebalanced.append(hook)

    def on_start(self, hook: Callable[[Positions], None]) -> None:
        """`hook(positions)` after each rebalance: where each source partition reads from."""
        self._started.append(hook)

    def on_revoke(self, hook: Callable[[set[Any]], None]) -> None:
        """`hook(partitions)` when partitions go to another worker."""
        self._revoked.append(hook)

    async def each(self, stream: faust.StreamT, of: type[E], handle: Handler[E, S], *,
                   key: Callable[[E], str] | None = None, state: TableState[S] | None = None,
                   turn: Callable[[E], Hashable] | None = None,
                   retry_while: Callable[[E], Usefulness] = always,
                   after: Callable[[faust.EventT], Awaitable[None]] | None = None) -> None:
        """`handle(value, state, origin)` for each record that is an `of`, its effects
        applied (the state at `key(value)` of `state` first), acked in order.

        Records that do not decode, or are not events of their topic, are dead-lettered;
        the topic's other event types are acked untouched. `turn(value)`: handlers of the
        same turn key run one at a time in this process (a record handed out twice waits
        for the first handling, then sees what it wrote down). `retry_while(value)`: how
        long a write that Kafka refuses for a passing reason is tried again. `after(event)`:
        called for every record read, poison included, once it is done
        (`self.acks.done_below` counts it).
        """
        async for event in cast(Any, stream).noack().events():  # acked below, in order
            if await self.first_reads.check(event):
                continue  # it comes again after its partition's start (see FirstReads)
            ticket = self.acks.arrived(event)
            try:
                if (error := decode_error(event)) is not None:
                    await self.dead_letters(event.message, error)
                elif isinstance(value := event.value, of):
                    async with self.in_turn.of(turn(value) if turn is not None else None):
                        k = key(value) if key is not None else None
                        current = state.get(k) if state is not None and k is not None else None
                        effects = await handle(value, current, origin_of(event))
                        await self.apply(event, effects, state, k, retry_while(value))
            except Exception as err:  # a bug with one record must not stop the rest
                log.exception("cannot handle %s", event.message)
                await self.dead_letters(event.message,
                                        f"{self.app.conf.id} error: {type(err).__name__}: {err}")
            self.acks.done(ticket)
            if after is not None:
                await after(event)

    async def apply(self, event: faust.EventT, effects: Effects[S],
                    state: TableState[S] | None, key: str | None, useful: Usefulness) -> None:
        """Refuse, write the state down, then publish: each write tried again while
        `useful`; a state that cannot be written in time publishes nothing."""
        message, what = event.message, f"{event.message.topic}@{event.message.offset}"
        if effects.refuse is not None:
            await self.dead_letters(message, effects.refuse)
        if (new := effects.state) is not KEEP:
            if state is None or key is None:
                raise TypeError(f"{what}: a handler without a state table returned a state")
            if await retried_while(lambda: state.put(key, new, message.partition), what,
                                   useful, self.max_backoff_s) is None:
                log.info("%s: its state could not be written down in time: nothing published",
                         what)
                return
        for out in effects.publish:
            await retried_while(partial(self.send, out, message.partition), what, useful,
                                self.max_backoff_s)

    async def send(self, out: Publish, partition: int) -> bool:
        """Publish on the input's partition (the topics are co-partitioned by key), where a
        restarted processor looks for it; True once the broker has it."""
        if out.topic not in self.outputs:
            self.outputs[out.topic] = faust_topic(self.app, self.settings.kafka, out.topic)
        await (await self.outputs[out.topic].send(key=out.key.encode(), value=out.event,
                                                  partition=partition))
        return True

    async def fresh(self, stream: faust.StreamT) -> AsyncIterator[faust.EventT]:
        """The stream's events, less those that come again after their partition's start."""
        async for event in stream.events():
            if not await self.first_reads.check(event):
                yield event


def origin_of(event: faust.EventT) -> Origin:
    m = event.message
    return Origin(m.topic, m.partition, m.offset, int(m.timestamp * 1000))


def run_worker(app: faust.App) -> None:
    """Run a faust app's worker in the foreground until SIGTERM/SIGINT."""
    faust.Worker(app, loglevel="INFO", quiet=True).execute_from_commandline()
