"""Committing everything an input event causes together with its offset: exactly once.

Handling one input event yields `Evaluated` (webgym_common.stream.handlers.Effects): records
to publish (scores, blocklist entries), the event's refusal (its dead letter) and, as the
state, the `TableWrites` to the evaluator's tables. `Outbox.commit` makes them one step
with the event's ack:

- With `processing_guarantee="exactly_once"` faust keeps one transactional
  producer per input partition and, every commit interval, commits in one Kafka
  transaction what was produced on it together with the input offsets acked so
  far. We write the table changes' changelog records and the outputs on the
  *input* partition's producer ourselves (faust's `topic.send` picks the
  producer by destination partition, which fails for topics the app does not
  consume, and sends table changelogs from a buffer that its commit does not
  flush), under the producer's transaction lock, when no commit is half-way
  (a commit snapshots the acked offsets before it takes the lock), right after
  the ack. So the next commit carries the ack, the state change and the outputs,
  or a crash aborts all three and the event is handled again.
- Commits happen in arrival order per partition (`arrived` hands out the place in
  line): webgym_common.stream.faust_app.InOrderAcks, the project's in-order acks, since
  faust alone could commit past an event still in flight.
- In `at_least_once` mode the records are sent and acknowledged before the ack.
- Effects the producer would refuse (a record over its size limit: a huge field folded
  into a table) are replaced by the event's refusal before anything is applied or acked,
  so one oversized event cannot crash the agent again after every restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import faust

from webgym_common.codec import Codec
from webgym_common.config import KafkaSettings
from webgym_common.events import Event
from webgym_common.stream.deadletters import dead_letter
from webgym_common.stream.faust_app import InOrderAcks, Ticket, changelog_record
from webgym_common.stream.handlers import Effects
from webgym_common.topics import Topic, topic_name

log = logging.getLogger(__name__)


class Record(NamedTuple):
    topic: str
    key: bytes | None
    value: bytes | None  # None: a tombstone
    partition: int | None = None


@dataclass
class TableWrites:
    """The evaluator's state change for one event: puts and deletes across its tables."""

    writes: list[tuple[faust.Table, str, Any]] = field(default_factory=list)  # value None: delete

    def put(self, table: faust.Table, key: str, value: Any) -> None:
        self.writes.append((table, key, value))

    def delete(self, table: faust.Table, key: str) -> None:
        self.writes.append((table, key, None))


Evaluated = Effects[TableWrites]  # what an evaluator handler returns


def oversize(records: Iterable[Record], limit: int) -> str | None:
    """Why the producer would refuse one of these records (None: it would take them all)."""
    for r in records:
        size = len(r.key or b"") + len(r.value or b"")
        if size > limit:
            return f"its effects hold a {size}-byte record for {r.topic} (limit {limit})"
    return None


class Outbox:
    def __init__(self, app: faust.App, kafka: KafkaSettings) -> None:
        self.app, self.kafka, self.codec = app, kafka, Codec()
        self.timeout_s = kafka.request_timeout_ms / 1000
        self.max_record_bytes = kafka.max_request_size
        self.acks = InOrderAcks()

    def arrived(self, event: faust.EventT) -> Ticket:
        """Take the event's place in line; call before anything that awaits."""
        return self.acks.arrived(event)

    async def commit(self, ticket: Ticket, effects: Evaluated) -> None:
        """Apply and publish the effects and ack the event, as one step, in line."""
        event = ticket.event
        try:
            await self.acks.turn(ticket)
            writes, records = self._staged(event, effects)
            if (why := oversize(records, self.max_record_bytes)) is not None:
                log.warning("refusing %s:%s: %s", event.message.topic, event.message.offset, why)
                writes, records = self._staged(event, Effects(refuse=why))
            tid = self._transactional_id(event)
            if tid is None:
                sent: list[Awaitable[Any]] = [
                    await self.app.producer.send(r.topic, r.key, r.value, r.partition, None, None)
                    for r in records]
                await asyncio.wait_for(asyncio.gather(*sent), self.timeout_s)
                self._apply(writes)
                event.ack()
            else:
                sent = await self._in_transaction(tid, event, writes, records)
        finally:
            self.acks.done(ticket, ack=False)  # acked above, in line (or not at all: moved)
            await self.acks.wake()
        # The broker's acknowledgement; the transaction's commit makes them visible.
        await asyncio.wait_for(asyncio.gather(*sent), self.timeout_s)

    def _staged(self, event: faust.EventT, effects: Evaluated
                ) -> tuple[list[tuple[faust.Table, str, Any]], list[Record]]:
        """The table writes, and every record they and the effects send."""
        writes = effects.state.writes if isinstance(effects.state, TableWrites) else []
        records = [*self._changelog(event, writes),
                   *(self._record(p.topic, p.key, p.event) for p in effects.publish)]
        if effects.refuse is not None:
            letter = dead_letter(event.message, effects.refuse, self.app.conf.id)
            records.append(self._record(Topic.DLQ, letter.source_topic, letter))
        return writes, records

    def _record(self, topic: Topic, key: str, event: Event) -> Record:
        return Record(topic_name(self.kafka, topic), key.encode(), self.codec.encode(event))

    def _transactional_id(self, event: faust.EventT) -> str | None:
        if not self.app.in_transaction:
            return None
        msg = event.message
        return f"{self.app.conf.id}-{self.app.assignor.group_for_topic(msg.topic)}-{msg.partition}"

    async def _in_transaction(self, tid: str, event: faust.EventT,
                              writes: list[tuple[faust.Table, str, Any]],
                              records: list[Record]) -> list[Awaitable[Any]]:
        producer: Any = self.app.producer  # faust's aiokafka driver: per-tid producers + locks
        consumer: Any = self.app.consumer
        while True:
            await consumer.maybe_wait_for_commit_to_finish()
            lock = producer._trn_locks.get(tid)
            if lock is None or tid not in producer._transaction_producers:
                log.info("%s moved to another worker; it handles this event again", tid)
                return []
            async with lock:
                if consumer._commit_fut is not None:
                    continue  # a commit started while we waited for the lock: let it finish
                transaction = producer._transaction_producers.get(tid)
                if transaction is None:
                    continue  # the partition was revoked meanwhile (checked above)
                # A commit that starts from here on sees the ack, and waits for this lock:
                # it carries the records appended below as well.
                self._apply(writes)
                event.ack()
                return [await transaction.send(r.topic, r.value, key=r.key, partition=r.partition)
                        for r in records]

    @staticmethod
    def _changelog(event: faust.EventT, writes: Iterable[tuple[faust.Table, str, Any]]
                   ) -> list[Record]:
        # Tables are co-partitioned with their source topics: the event's partition.
        return [Record(*changelog_record(table, key, value), event.message.partition)
                for table, key, value in writes]

    @staticmethod
    def _apply(writes: Iterable[tuple[faust.Table, str, Any]]) -> None:
        for table, key, value in writes:
            if value is not None:
                table.data[key] = value
            elif key in table.data:
                del table.data[key]
