"""A faust app's restart safety in one place: the rewind, first reads, in-order acks,
dead letters, one handler per key, and the worker's start-up.

Delivery: at least once. A record is acked only once its handler returned and every
record that arrived before it on its partition is done (InOrderAcks), so a SIGKILL at
any moment leaves every unfinished record to be read again, by this process restarted
or by the partition's next owner; handlers make the re-read harmless (the policy finds
its written-down action, the evaluator its `scored` entry). A record that is not one of
our events, or whose handler raises, is dead-lettered with the reason (once per record
and group) and acked: one poison record never stops the agent.

    reliable = ReliableApp(app, settings, [Topic.EPISODES, Topic.OBSERVATIONS])

    @app.agent(observations, concurrency=8)
    async def decide(stream):
        await reliable.each(stream, StepObserved, handle_observation)

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
from typing import Any, TypeVar, cast

import faust

from webgym_common.config import Settings
from webgym_common.events import Event
from webgym_common.stream.faust_app import (
    FirstReads,
    InOrderAcks,
    decode_error,
    dlq_sender,
    rewind_uncommitted,
)
from webgym_common.topics import Topic, topic_name

log = logging.getLogger(__name__)
E = TypeVar("E", bound=Event)
Handler = Callable[[faust.EventT, E], Awaitable[None]]
Positions = dict[Any, int]
Rewind = Callable[[faust.App, set[str]], Awaitable[Positions]]


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
    async def of(self, key: Hashable) -> AsyncIterator[None]:
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
                 rewind: Rewind = rewind_uncommitted) -> None:
        self.app = app
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

    async def each(self, stream: faust.StreamT, of: type[E], handle: Handler[E], *,
                   key: Callable[[E], Hashable] | None = None,
                   after: Callable[[faust.EventT], Awaitable[None]] | None = None) -> None:
        """`await handle(event, value)` for each record that is an `of`, acked in order.

        Records that do not decode, or are not events of their topic, are dead-lettered;
        the topic's other event types are acked untouched. `key(value)`: handlers of the
        same key run one at a time in this process (a record handed out twice waits for
        the first handling, then sees what it wrote down). `after(event)`: called for every
        record read, poison included, once it is done (`self.acks.done_below` counts it).
        """
        async for event in cast(Any, stream).noack().events():  # acked below, in order
            if await self.first_reads.check(event):
                continue  # it comes again after its partition's start (see FirstReads)
            ticket = self.acks.arrived(event)
            try:
                if (error := decode_error(event)) is not None:
                    await self.dead_letters(event.message, error)
                elif isinstance(value := event.value, of):
                    if key is None:
                        await handle(event, value)
                    else:
                        async with self.in_turn.of(key(value)):
                            await handle(event, value)
            except Exception as err:  # a bug with one record must not stop the rest
                log.exception("cannot handle %s", event.message)
                await self.dead_letters(event.message,
                                        f"{self.app.conf.id} error: {type(err).__name__}: {err}")
            self.acks.done(ticket)
            if after is not None:
                await after(event)

    async def fresh(self, stream: faust.StreamT) -> AsyncIterator[faust.EventT]:
        """The stream's events, less those that come again after their partition's start."""
        async for event in stream.events():
            if not await self.first_reads.check(event):
                yield event


def run_worker(app: faust.App) -> None:
    """Run a faust app's worker in the foreground until SIGTERM/SIGINT."""
    faust.Worker(app, loglevel="INFO", quiet=True).execute_from_commandline()
